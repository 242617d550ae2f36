"""The operations marts computed straight from the landing files, in plain Python (no dbt, no DuckDB).

Reads every landed line (plain or gzip, with or without the JSON schema wrapper, tombstones skipped), keeps one
copy per event identity, and applies the definitions of marts.md "Operations marts" literally: the state of an order
at an instant is the change with the highest lsn among those before it, a window's overdue count looks at every
order at the window's end, a ping's predecessor is found by sorting the courier's pings.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import statistics
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

EARTH_RADIUS_KM = 6371.0088


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, int):
        return datetime(1970, 1, 1) + timedelta(microseconds=value)
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).replace(tzinfo=None)


def _lines(landing: Path, topic: str) -> list[Any]:
    values = []
    for path in sorted((landing / "topics" / topic).rglob("*.json*")):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for raw in data.splitlines():
            if raw.strip():
                value = json.loads(raw)
                if isinstance(value, dict) and "payload" in value and "schema" in value:
                    value = value["payload"]
                if value is not None:
                    values.append(value)
    return values


@dataclass(frozen=True)
class Change:
    order_id: int
    lsn: int
    op: str
    event_time: datetime
    row: dict[str, Any]  # `after`, empty for a delete


@dataclass(frozen=True)
class Ping:
    ping_id: str
    courier_id: int
    lat: float
    lon: float
    recorded_at: datetime


def order_changes(landing: Path) -> list[Change]:
    changes = {}
    for env in _lines(landing, "oltp.public.orders"):
        key = (env["after"] or env["before"])["order_id"]
        identity = (key, env["source"]["lsn"], env["op"])
        at = datetime(1970, 1, 1) + timedelta(milliseconds=env["source"]["ts_ms"])
        changes[identity] = Change(key, env["source"]["lsn"], env["op"], at, env["after"] or {})
    return list(changes.values())


def pings(landing: Path) -> list[Ping]:
    found = {}
    for row in _lines(landing, "logistics.tracking_pings"):
        at = _time(row["recorded_at"])
        assert at is not None
        found[row["ping_id"]] = Ping(row["ping_id"], row["courier_id"], row["lat"], row["lon"], at)
    return list(found.values())


def deliveries(changes: list[Change]) -> list[dict[str, Any]]:
    """fct_deliveries: orders whose latest change is not a delete and has status delivered."""
    latest: dict[int, Change] = {}
    for c in changes:
        if c.order_id not in latest or c.lsn > latest[c.order_id].lsn:
            latest[c.order_id] = c
    return [
        {
            "region": c.row["region"],
            "created_at": _time(c.row["created_at"]),
            "promised_at": _time(c.row["promised_at"]),
            "delivered_at": _time(c.row["delivered_at"]),
        }
        for c in latest.values()
        if c.op != "d" and c.row.get("status") == "delivered"
    ]


def region_sla(
    changes: list[Change], width_minutes: int = 5, min_deliveries: int = 20, late_share_max: str = "0.05"
) -> dict[tuple[datetime, str], tuple[int, int, Decimal | None, int, bool]]:
    """(window_start, region) -> (deliveries, late_deliveries, late_share, overdue_open, breached)."""
    width = timedelta(minutes=width_minutes)

    def window_of(t: datetime) -> datetime:
        hour = t.replace(minute=0, second=0, microsecond=0)
        return hour + width * ((t - hour) // width)

    first = window_of(min(c.event_time for c in changes))
    last = window_of(max(c.event_time for c in changes))
    counts: dict[tuple[datetime, str], list[int]] = {}
    for d in deliveries(changes):
        w = window_of(d["delivered_at"])
        if first <= w <= last:
            cell = counts.setdefault((w, d["region"]), [0, 0, 0])
            cell[0] += 1
            cell[1] += d["delivered_at"] > d["promised_at"]
    by_order: dict[int, list[Change]] = {}
    for c in changes:
        by_order.setdefault(c.order_id, []).append(c)
    w = first
    while w <= last:
        end = w + width
        for history in by_order.values():
            before = [c for c in history if c.event_time < end]
            if not before:
                continue
            state = max(before, key=lambda c: c.lsn)
            promised = _time(state.row.get("promised_at"))
            if (
                state.op != "d"
                and state.row.get("status") not in ("delivered", "cancelled")
                and promised is not None
                and promised < end
            ):
                counts.setdefault((w, state.row["region"]), [0, 0, 0])[2] += 1
        w = end
    result = {}
    for key, (n, late, overdue) in counts.items():
        share = (Decimal(late) / Decimal(n)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP) if n else None
        breached = n >= min_deliveries and share is not None and share > Decimal(late_share_max)
        result[key] = (n, late, share, overdue, breached)
    return result


def region_delivery_daily(
    changes: list[Change],
) -> dict[tuple[date, str], tuple[int, float, int, float | None, float | None, bool]]:
    """(delivery_date, region) -> (deliveries, avg minutes, baseline_days, baseline avg, baseline stddev, anomaly)."""
    minutes: dict[tuple[date, str], list[float]] = {}
    for d in deliveries(changes):
        duration = (d["delivered_at"] - d["created_at"]) / timedelta(minutes=1)
        minutes.setdefault((d["delivered_at"].date(), d["region"]), []).append(duration)
    averages = {key: statistics.fmean(values) for key, values in minutes.items()}
    result = {}
    for (day, region), values in minutes.items():
        baseline = [
            averages[(day - timedelta(days=k), region)]
            for k in range(1, 8)
            if (day - timedelta(days=k), region) in averages
        ]
        mean = statistics.fmean(baseline) if len(baseline) >= 3 else None
        stddev = statistics.stdev(baseline) if len(baseline) >= 3 else None
        avg = averages[(day, region)]
        anomaly = mean is not None and stddev is not None and abs(avg - mean) > 3 * stddev
        result[(day, region)] = (len(values), avg, len(baseline), mean, stddev, anomaly)
    return result


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))


def gps_jumps(
    found: list[Ping], limit_kmh: float = 150.0
) -> dict[str, tuple[int, str, datetime, datetime, float, float]]:
    """ping_id -> (courier_id, previous_ping_id, recorded_at, previous_recorded_at, distance_km, implied_kmh)."""
    by_courier: dict[int, list[Ping]] = {}
    for p in found:
        by_courier.setdefault(p.courier_id, []).append(p)
    result = {}
    for courier, mine in by_courier.items():
        mine.sort(key=lambda p: (p.recorded_at, p.ping_id))
        for previous, current in itertools.pairwise(mine):
            if current.recorded_at == previous.recorded_at:
                continue
            km = haversine_km(previous.lat, previous.lon, current.lat, current.lon)
            kmh = km / ((current.recorded_at - previous.recorded_at) / timedelta(hours=1))
            if kmh > limit_kmh:
                result[current.ping_id] = (
                    courier,
                    previous.ping_id,
                    current.recorded_at,
                    previous.recorded_at,
                    km,
                    kmh,
                )
    return result
