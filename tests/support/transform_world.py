"""A small, seeded CDC world for the transform tests, written as landing files and ingested into bronze.

It produces the hard cases on purpose, at high rates in few rows: updates landing before their insert, deletes
landing before an update, redelivered duplicates in later hours, late events beyond the allowed lateness, a tier
change and a no-op tenant update, deleted couriers, and payments (one of them mismatched).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from tests.support.bronze import cdc, dump, iso, order, ping, write_file

START = datetime(2026, 11, 2, 0)
TOPIC_OF = {
    "tenants": "oltp.public.tenants",
    "couriers": "oltp.public.couriers",
    "orders": "oltp.public.orders",
    "payments": "oltp.public.payments",
    "tracking_pings": "logistics.tracking_pings",
}


@dataclass
class Event:
    table: str
    event_time: datetime
    payload: dict[str, Any]  # row (pings) or (op, after, before)
    op: str = ""
    lsn: int = 0


@dataclass
class World:
    hours: list[datetime]
    lines: dict[tuple[str, datetime], list[bytes]] = field(default_factory=dict)


def _tenant(tid: str, tier: str, ts: datetime, name: str | None = None) -> dict[str, Any]:
    return {"tenant_id": tid, "name": name or f"Tenant {tid}", "tier": tier, "region": "north", "updated_at": iso(ts)}


def _courier(cid: int, ts: datetime, active: bool = True) -> dict[str, Any]:
    vehicle = ("bike", "motorbike", "car", "van")[cid % 4]
    return {
        "courier_id": cid,
        "name": f"C{cid}",
        "region": "north",
        "vehicle": vehicle,
        "active": active,
        "updated_at": iso(ts),
    }


def _payment(pid: int, oid: int, amount: str, status: str, ts: datetime) -> dict[str, Any]:
    return {
        "payment_id": pid,
        "order_id": oid,
        "amount": amount,
        "method": "pix",
        "status": status,
        "created_at": iso(ts),
        "updated_at": iso(ts),
    }


def _order_row(
    oid: int,
    created: datetime,
    base: dict[str, Any],
    courier: int,
    status: str,
    at: datetime,
    delivered: datetime | None = None,
) -> dict[str, Any]:
    return order(
        oid,
        created,
        status=status,
        updated_at=iso(at),
        courier_id=None if status == "created" else courier,
        delivered_at=iso(delivered) if delivered else None,
        **base,
    )


def build_world(hours: int = 6, orders_per_hour: int = 12, seed: int = 7, start: datetime = START) -> World:
    """Events of ``hours`` arrival hours, assigned to arrival hours with delays, duplicates and lateness."""
    rng = random.Random(seed)
    events: list[Event] = []
    snap = start - timedelta(days=1)
    regions = ("north", "south", "east")
    for i, tier in enumerate(("bronze", "silver", "gold", "silver"), start=1):
        events.append(Event("tenants", snap, {"after": _tenant(f"t-{i:03d}", tier, snap)}, op="r"))
    # A tier change between creation and delivery of t-001's orders, and a no-op update of t-002.
    change = start + timedelta(hours=2, minutes=30)
    events.append(Event("tenants", change, {"after": _tenant("t-001", "gold", change)}, op="u"))
    noop = start + timedelta(hours=1, minutes=10)
    events.append(Event("tenants", noop, {"after": _tenant("t-002", "silver", noop)}, op="u"))
    for cid in range(1, 7):
        events.append(Event("couriers", snap, {"after": _courier(cid, snap)}, op="r"))
    gone = start + timedelta(hours=3, minutes=5)
    events.append(Event("couriers", gone, {"after": None, "before": {"courier_id": 6}}, op="d"))

    oid = 1000
    pid = 5000
    for h in range(hours):
        for _ in range(orders_per_hour):
            oid += 1
            t = start + timedelta(hours=h, minutes=rng.randrange(0, 60), seconds=rng.randrange(0, 60))
            tenant = f"t-{rng.randrange(1, 5):03d}"
            courier = rng.randrange(1, 7)
            region = rng.choice(regions)
            total = f"{rng.randrange(2000, 20000) / 100:.2f}"
            fee = f"{rng.randrange(300, 1500) / 100:.2f}"
            base = {
                "tenant_id": tenant,
                "region": region,
                "total_amount": total,
                "delivery_fee": fee,
                "promised_at": iso(t + timedelta(minutes=45)),
            }

            row = partial(_order_row, oid, t, base, courier)

            events.append(Event("orders", t, {"after": row("created", t)}, op="c"))
            pid += 1
            events.append(
                Event(
                    "payments",
                    t + timedelta(minutes=1),
                    {"after": _payment(pid, oid, total, "authorized", t + timedelta(minutes=1))},
                    op="c",
                )
            )
            if rng.random() < 0.1:
                at = t + timedelta(minutes=8)
                events.append(Event("orders", at, {"after": row("cancelled", at)}, op="u"))
                continue
            for minutes, status in ((5, "assigned"), (15, "picked_up"), (22, "in_transit")):
                at = t + timedelta(minutes=minutes)
                events.append(Event("orders", at, {"after": row(status, at)}, op="u"))
            for k in range(6):
                at = t + timedelta(minutes=6 + 6 * k)
                pid_text = f"{oid:08d}-0000-4000-8000-{k:012d}"
                events.append(
                    Event("tracking_pings", at, {"row": ping(pid_text, at, courier_id=courier, order_id=oid)})
                )
            done = t + timedelta(minutes=rng.randrange(30, 70))
            events.append(Event("orders", done, {"after": row("delivered", done, done)}, op="u"))
            captured = total if rng.random() > 0.1 else f"{float(total) - 1:.2f}"
            events.append(Event("payments", done, {"after": _payment(pid, oid, captured, "captured", done)}, op="u"))
            if rng.random() < 0.06:
                at = done + timedelta(minutes=20)
                events.append(Event("orders", at, {"after": None, "before": {"order_id": oid}}, op="d"))

    events.sort(key=lambda e: (e.event_time, e.table))
    lsn = 1000
    for e in events:
        lsn += 10
        e.lsn = lsn

    world = World(hours=[start + timedelta(hours=h) for h in range(hours)])
    last = hours - 1

    def land(e: Event, hour_index: int) -> None:
        if hour_index > last:
            return
        arrival = start + timedelta(hours=hour_index)
        if e.table == "tracking_pings":
            line = dump(e.payload["row"])
        else:
            line = dump(
                cdc(e.op, e.table, e.payload["after"], before=e.payload.get("before"), lsn=e.lsn, ts=e.event_time)
            )
        world.lines.setdefault((TOPIC_OF[e.table], arrival), []).append(line)

    for e in events:
        natural = max(0, int((e.event_time - start).total_seconds() // 3600))
        roll = rng.random()
        if roll < 0.08:
            delay = 1  # out of order, within the allowed lateness
        elif roll < 0.14:
            delay = 3  # late beyond L = 2h
        else:
            delay = 0
        land(e, natural + delay)
        if rng.random() < 0.06:
            land(e, natural + delay + rng.randrange(0, 3))  # redelivered copy
    return world


def write_landing(world: World, landing: Path) -> None:
    """One file per topic and arrival hour (partition 0, offsets continuing per topic)."""
    offsets: dict[str, int] = {}
    for (topic, hour), lines in sorted(world.lines.items()):
        start = offsets.get(topic, 0)
        write_file(landing, topic, hour, 0, start, lines, gz=(hour.hour % 2 == 1))
        offsets[topic] = start + len(lines)
