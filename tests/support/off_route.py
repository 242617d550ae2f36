"""An independent computation of ``marts.fct_courier_off_route`` (docs/contract/marts.md) in plain Python."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ACTIVE = ("assigned", "picked_up", "in_transit")
KM_PER_DEGREE = 6371.0088 * math.pi / 180


def corridor_km(lat: float, lon: float, route: tuple[float, float, float, float]) -> float:
    """Distance (km) of a point from the straight segment pickup -> drop-off, on the plane tangent at the segment's
    mean latitude (x = longitude x cos(mean latitude))."""
    plat, plon, dlat, dlon = route
    k = math.cos(math.radians((plat + dlat) / 2)) * KM_PER_DEGREE
    bx, by = (dlon - plon) * k, (dlat - plat) * KM_PER_DEGREE
    px, py = (lon - plon) * k, (lat - plat) * KM_PER_DEGREE
    length2 = bx * bx + by * by
    t = 0.0 if length2 == 0 else max(0.0, min(1.0, (px * bx + py * by) / length2))
    return math.hypot(px - t * bx, py - t * by)


@dataclass(frozen=True)
class Change:
    """One staged order change (the columns the monitor reads)."""

    order_id: int
    lsn: int
    event_time: datetime
    op: str
    status: str | None
    courier_id: int | None
    region: str | None
    route: tuple[float, float, float, float] | None


@dataclass(frozen=True)
class Ping:
    ping_id: str
    courier_id: int
    lat: float
    lon: float
    recorded_at: datetime


def active_periods(changes: Iterable[Change]) -> list[dict[str, Any]]:
    """Per order change leaving the order active with a courier: that courier, from the change's event time until the
    order's next change (by LSN)."""
    by_order: dict[int, list[Change]] = defaultdict(list)
    for c in changes:
        by_order[c.order_id].append(c)
    periods = []
    for chs in by_order.values():
        chs.sort(key=lambda c: c.lsn)
        for c, nxt in zip(chs, [*chs[1:], None], strict=True):
            if c.op != "d" and c.status in ACTIVE and c.courier_id is not None:
                valid_to = None if nxt is None else nxt.event_time
                periods.append({"change": c, "valid_from": c.event_time, "valid_to": valid_to})
    return periods


def episodes(changes: Iterable[Change], pings: Iterable[Ping], km: float, minutes: float) -> tuple[set[tuple], int]:
    """The mart's rows (courier, order, started_at, ended_at, minutes rounded to 1e-6, pings, max km rounded to 1e-6,
    region) and the number of orders active without coordinates."""
    periods = active_periods(changes)
    missing = {p["change"].order_id for p in periods if p["change"].route is None}
    by_courier: dict[int, list[Ping]] = defaultdict(list)
    for p in pings:
        by_courier[p.courier_id].append(p)
    pair_pings: dict[tuple[int, int], list[tuple[Ping, dict[str, Any]]]] = defaultdict(list)
    open_pairs = set()
    for period in periods:
        c = period["change"]
        pair = (c.courier_id, c.order_id)
        if period["valid_to"] is None:
            open_pairs.add(pair)
        if c.route is None:
            continue
        for p in by_courier[c.courier_id]:
            if p.recorded_at >= period["valid_from"] and (
                period["valid_to"] is None or p.recorded_at < period["valid_to"]
            ):
                pair_pings[pair].append((p, period))
    rows = set()
    for pair, seq in pair_pings.items():
        seq.sort(key=lambda x: (x[0].recorded_at, x[0].ping_id))
        runs: list[list[tuple[Ping, float, str | None]]] = []
        current: list[tuple[Ping, float, str | None]] | None = None
        closed_by_return = []
        for p, period in seq:
            d = corridor_km(p.lat, p.lon, period["change"].route)
            if d > km:
                if current is None:
                    current = []
                    runs.append(current)
                current.append((p, d, period["change"].region))
            elif current is not None:
                closed_by_return.append(current)
                current = None
        for run in runs:
            start, last = run[0][0].recorded_at, run[-1][0].recorded_at
            span = (last - start).total_seconds() / 60
            if span < minutes:
                continue
            closed = any(r is run for r in closed_by_return) or pair not in open_pairs
            rows.add(
                (
                    pair[0],
                    pair[1],
                    start,
                    last if closed else None,
                    round(span, 6),
                    len(run),
                    round(max(d for _, d, _ in run), 6),
                    run[0][2],
                )
            )
    return rows, len(missing)
