"""Hand-written landing files for the bronze tests: every contract case, small and exact.

Each builder returns what it wrote so that tests can assert exact counts. Used until (and beside) the
generator: these cases are exact and tiny, the generator's data is realistic and larger.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from logistics_platform.lib.bronze.accounting import TopicAccount, account_hours
from logistics_platform.lib.bronze.landing import LandingFile, hour_dir, iter_content
from logistics_platform.settings import Settings

HOUR = datetime(2026, 11, 2, 10)
EPOCH = datetime(1970, 1, 1)


def account_hour(settings: Settings, hour: datetime) -> dict[str, TopicAccount]:
    """Table -> the accounting of one arrival hour (the package accounts hours in batches)."""
    return account_hours(settings, [hour])[hour]


def ms(dt: datetime) -> int:
    return int((dt - EPOCH).total_seconds() * 1000)


def iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write_file(
    landing: Path, topic: str, hour: datetime, partition: int, offset: int, lines: list[bytes], gz: bool = False
) -> Path:
    folder = landing / hour_dir(topic, hour)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topic}+{partition}+{offset:010d}.json{'.gz' if gz else ''}"
    data = b"".join(line + b"\n" for line in lines)
    if gz:
        # mtime=0: byte-identical files for identical content
        path.write_bytes(gzip.compress(data, mtime=0))
    else:
        path.write_bytes(data)
    return path


def dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def cdc(
    op: str,
    table: str,
    after: dict[str, Any] | None,
    *,
    lsn: int,
    ts: datetime,
    before: dict[str, Any] | None = None,
    wrapped: bool = False,
) -> dict[str, Any]:
    env = {
        "before": before,
        "after": after,
        "source": {
            "version": "2.7.0.Final",
            "connector": "postgresql",
            "name": "oltp",
            "ts_ms": ms(ts),
            "snapshot": "false",
            "db": "oltp",
            "sequence": None,
            "schema": "public",
            "table": table,
            "txId": lsn // 10,
            "lsn": lsn,
            "xmin": None,
        },
        "op": op,
        "ts_ms": ms(ts) + 50,
    }
    return {"schema": {"type": "struct", "name": f"oltp.public.{table}.Envelope"}, "payload": env} if wrapped else env


def order(order_id: int, ts: datetime, **over: Any) -> dict[str, Any]:
    row = {
        "order_id": order_id,
        "tenant_id": "t-001",
        "courier_id": None,
        "region": "north",
        "status": "created",
        "total_amount": "129.90",
        "delivery_fee": "12.00",
        "created_at": iso(ts),
        "promised_at": iso(ts + timedelta(hours=1)),
        "delivered_at": None,
        "updated_at": iso(ts),
    }
    row.update(over)
    return row


def ping(ping_id: str, ts: datetime, **over: Any) -> dict[str, Any]:
    row = {
        "ping_id": ping_id,
        "courier_id": 7,
        "order_id": 1,
        "lat": -23.5,
        "lon": -46.6,
        "speed_kmh": 31.5,
        "recorded_at": iso(ts),
    }
    row.update(over)
    return row


def contract_hour(landing: Path, hour: datetime = HOUR) -> dict[str, dict[str, Any]]:
    """One arrival hour holding every case of docs/contract/sources.md. Returns per-topic expected counts."""
    t = hour + timedelta(minutes=5)
    orders = [
        dump(cdc("r", "orders", order(1, t), lsn=100, ts=t)),
        dump(cdc("c", "orders", order(2, t), lsn=110, ts=t, wrapped=True)),  # schema/payload form
        dump(cdc("u", "orders", order(1, t, status="assigned", courier_id=7, total_amount=130.5), lsn=120, ts=t)),
        dump(cdc("d", "orders", None, before={"order_id": 2}, lsn=130, ts=t)),
        b"null",  # tombstone after the delete
        dump({"schema": None, "payload": None}),  # tombstone, schemas.enable=true
        b'{"op":"c","after":{"order_id":3',  # truncated
        b"not json at all",
        b'{"op":"c","after":{"order_id":4,"region":"\xff\xfe"}}',  # not UTF-8
        dump({**cdc("c", "orders", order(5, t), lsn=140, ts=t), "op": "x"}),  # invalid op
        dump({k: v for k, v in cdc("c", "orders", order(6, t), lsn=150, ts=t).items() if k != "op"}),  # no op
        dump(cdc("c", "orders", {k: v for k, v in order(7, t).items() if k != "order_id"}, lsn=160, ts=t)),
        dump(cdc("c", "orders", order("8", t), lsn=170, ts=t)),  # key of the wrong type
        dump(cdc("c", "orders", order(9, t, total_amount="abc"), lsn=180, ts=t)),
        dump(cdc("c", "orders", order(10, t, created_at="yesterday"), lsn=190, ts=t)),
        dump(cdc("c", "orders", None, lsn=200, ts=t)),  # after missing for c
        dump({**cdc("c", "orders", order(12, t), lsn=210, ts=t), "source": {"ts_ms": ms(t)}}),  # no lsn
        # late: event time 3h before the arrival hour (L = 2h)
        dump(cdc("u", "orders", order(1, t, status="picked_up"), lsn=125, ts=hour - timedelta(hours=3))),
        # epoch-micros timestamp and numeric decimal
        dump(cdc("c", "orders", order(13, t, created_at=ms(t) * 1000, delivery_fee=7), lsn=220, ts=t)),
    ]
    evolved = [dump(cdc("c", "orders", order(14, t, tip_amount=2.5), lsn=230, ts=t))]
    write_file(landing, "oltp.public.orders", hour, 0, 0, orders)
    write_file(landing, "oltp.public.orders", hour, 1, 500, evolved, gz=True)
    pings = [
        dump(ping("p-1", t)),
        dump(ping("p-2", t, order_id=None)),
        dump({"schema": {"type": "struct"}, "payload": ping("p-3", t)}),
        dump(ping("p-4", t, lat="north")),
        dump({k: v for k, v in ping("p-5", t).items() if k != "ping_id"}),
        dump(ping("p-6", hour - timedelta(hours=5))),  # late
    ]
    write_file(landing, "logistics.tracking_pings", hour, 0, 0, pings, gz=True)
    tenants = [
        dump(
            cdc(
                "r",
                "tenants",
                {"tenant_id": "t-001", "name": "Acme", "tier": "gold", "region": "north", "updated_at": iso(t)},
                lsn=10,
                ts=t,
            )
        ),
    ]
    write_file(landing, "oltp.public.tenants", hour, 0, 0, tenants)
    couriers = [
        dump(
            cdc(
                "c",
                "couriers",
                {
                    "courier_id": 7,
                    "name": "Ana",
                    "region": "north",
                    "vehicle": "bike",
                    "active": True,
                    "updated_at": iso(t),
                },
                lsn=20,
                ts=t,
            )
        ),
        dump(
            cdc(
                "u",
                "couriers",
                {
                    "courier_id": 7,
                    "name": "Ana",
                    "region": "north",
                    "vehicle": "bike",
                    "active": "yes",
                    "updated_at": iso(t),
                },
                lsn=21,
                ts=t,
            )
        ),
    ]
    write_file(landing, "oltp.public.couriers", hour, 0, 0, couriers)
    payments = [
        dump(
            cdc(
                "c",
                "payments",
                {
                    "payment_id": 1,
                    "order_id": 1,
                    "amount": "129.90",
                    "method": "pix",
                    "status": "authorized",
                    "created_at": iso(t),
                    "updated_at": iso(t),
                },
                lsn=30,
                ts=t,
                wrapped=True,
            )
        ),
    ]
    write_file(landing, "oltp.public.payments", hour, 0, 0, payments)
    return {
        "orders": {
            "lines": len(orders) + len(evolved),
            "rows": 7,
            "tombstones": 2,
            "late": 1,
            "quarantined": {
                "malformed_json": 3,
                "invalid_op": 2,
                "missing_key": 2,
                "invalid_value:total_amount": 1,
                "invalid_value:created_at": 1,
                "invalid_envelope": 2,
            },
        },
        "tracking_pings": {
            "lines": 6,
            "rows": 4,
            "tombstones": 0,
            "late": 1,
            "quarantined": {"invalid_value:lat": 1, "missing_key": 1},
        },
        "tenants": {"lines": 1, "rows": 1, "tombstones": 0, "late": 0, "quarantined": {}},
        "couriers": {"lines": 2, "rows": 1, "tombstones": 0, "late": 0, "quarantined": {"invalid_value:active": 1}},
        "payments": {"lines": 1, "rows": 1, "tombstones": 0, "late": 0, "quarantined": {}},
    }


def bulk_hour(landing: Path, hour: datetime, pings: int, orders: int, lines_per_file: int = 5000) -> int:
    """A large clean hour of pings and order changes, written fast (memory and volume tests). Returns lines."""
    t = hour + timedelta(minutes=1)
    written = 0
    for topic, n, make in (
        ("logistics.tracking_pings", pings, lambda i: dump(ping(f"p-{hour:%H}-{i:09d}", t, courier_id=i % 500))),
        ("oltp.public.orders", orders, lambda i: dump(cdc("u", "orders", order(i, t), lsn=10 * i + 1, ts=t))),
    ):
        for start in range(0, n, lines_per_file):
            count = min(lines_per_file, n - start)
            write_file(landing, topic, hour, 0, start, [make(start + j) for j in range(count)])
            written += count
    return written


def iter_lines(f: LandingFile) -> Iterator[bytes]:
    """A file's lines as bytes, one by one (the reference the block-wise counts and readers are checked against)."""
    pending: list[bytes] = []  # pieces of a line longer than a chunk, joined once its end arrives
    for chunk in iter_content(f):
        if b"\n" not in chunk:
            pending.append(chunk)
            continue
        lines = chunk.split(b"\n")
        if pending:
            lines[0] = b"".join([*pending, lines[0]])
        pending = [lines.pop()]
        yield from lines
    tail = b"".join(pending)
    if tail:
        yield tail
