"""A seeded multi-day CDC world for the operations marts, written as landing files.

Besides the transform world's hard cases (out-of-order and late arrivals, redelivered copies) it holds on purpose what
the operations marts look for: a burst of late deliveries in one SLA window (a breach), orders left open past their
promise (overdue), one deleted and one cancelled while overdue, an order delivered exactly at its promise, a region
whose deliveries take three times longer on the last day (an anomaly), GPS jumps, pings sharing a timestamp, and one
trip a day ridden off its pickup -> drop-off corridor (an off-route episode).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from tests.support.bronze import cdc, dump, iso, ping
from tests.support.transform_world import TOPIC_OF, World

START = datetime(2026, 11, 2)
DAYS = 5
# Arrival hours of each day: the day's orders are created from 09:40 on and land in these.
DAY_HOURS = (10, 11, 12, 13)
REGIONS = ("north", "south", "east")
# The breach: day 2, north, 24 deliveries in the 10:30 window, most after their 10:31 promise.
BREACH_DAY, BREACH_WINDOW = 2, timedelta(hours=10, minutes=30)
# The anomaly: the last day, south takes about three times as long.
ANOMALY_DAY, ANOMALY_REGION = DAYS - 1, "south"


def _order(
    oid: int, created: datetime, region: str, courier: int, promised: datetime, **coordinates: float
) -> dict[str, Any]:
    return {
        **coordinates,
        "order_id": oid,
        "tenant_id": f"t-{oid % 3 + 1:03d}",
        "courier_id": courier,
        "region": region,
        "status": "created",
        "total_amount": "50.00",
        "delivery_fee": "5.00",
        "created_at": iso(created),
        "promised_at": iso(promised),
        "delivered_at": None,
        "updated_at": iso(created),
    }


def build_ops_world(seed: int = 11, start: datetime = START) -> World:
    """DAYS days from ``start`` (a midnight), landed in the hours DAY_HOURS of each day."""
    rng = random.Random(seed)
    events: list[tuple[str, datetime, dict[str, Any]]] = []  # (table, event time, payload)
    snap = start - timedelta(days=1)
    for i in range(1, 4):
        row = {"tenant_id": f"t-{i:03d}", "name": f"T{i}", "tier": "silver", "region": "north", "updated_at": iso(snap)}
        events.append(("tenants", snap, {"op": "r", "after": row}))
    for cid in range(1, 13):
        row = {"courier_id": cid, "name": f"C{cid}", "region": "north", "vehicle": "bike", "active": True}
        events.append(("couriers", snap, {"op": "r", "after": {**row, "updated_at": iso(snap)}}))

    def change(row: dict[str, Any], at: datetime, op: str = "u", **values: Any) -> None:
        row.update(values, updated_at=iso(at))
        events.append(("orders", at, {"op": op, "after": dict(row)}))

    def pings_along(oid: int, courier: int, start: datetime, end: datetime, jump: bool) -> None:
        base_lat, base_lon = -23.5 + courier * 0.01, -46.6
        at, k = start, 0
        while at <= end:
            lat = base_lat + 0.0005 * k + (1.0 if jump and k == 3 else 0.0)
            row = ping(
                f"{oid:08d}-0000-4000-8000-{k:012d}", at, courier_id=courier, order_id=oid, lat=lat, lon=base_lon
            )
            events.append(("tracking_pings", at, {"row": row}))
            if k == 1:  # a second ping of the courier at the same instant
                twin = ping(f"{oid:08d}-0000-4000-9000-{k:012d}", at, courier_id=courier, order_id=oid, lat=lat)
                events.append(("tracking_pings", at, {"row": {**twin, "lon": base_lon + 0.0001}}))
            at += timedelta(minutes=5, seconds=rng.randrange(0, 30))
            k += 1

    oid = 1000
    for day in range(DAYS):
        day_start = start + timedelta(days=day)
        for region in REGIONS:
            for n in range(6):
                oid += 1
                courier = rng.randrange(1, 13)
                created = day_start + timedelta(hours=10, minutes=rng.randrange(0, 40), seconds=rng.randrange(0, 60))
                slow = day == ANOMALY_DAY and region == ANOMALY_REGION
                minutes = rng.uniform(90, 110) if slow else rng.uniform(25, 35)
                delivered = created + timedelta(minutes=minutes)
                promised = delivered if n == 0 else created + timedelta(minutes=45)  # n == 0: exactly on promise
                # The corridor of the courier's pings (pings_along), one trip a day ridden 0.05 degrees east of it
                # (about 5 km): an off-route episode. Later orders (the SLA burst, the open ones) have no coordinates.
                lat, lon = -23.5 + courier * 0.01, -46.6 + (0.05 if n == 2 and region == REGIONS[0] else 0.0)
                corridor = {"pickup_lat": lat, "pickup_lon": lon, "dropoff_lat": lat + 0.02, "dropoff_lon": lon}
                row = _order(oid, created, region, courier, promised, **corridor)
                change(row, created, op="c")
                change(row, created + timedelta(minutes=3), status="assigned")
                change(row, created + timedelta(minutes=10), status="in_transit")
                change(row, delivered, status="delivered", delivered_at=iso(delivered))
                pings_along(oid, courier, created + timedelta(minutes=4), delivered, jump=n == 1 and region == "east")
        if day == BREACH_DAY:
            window = day_start + BREACH_WINDOW
            for n in range(24):
                oid += 1
                created = window - timedelta(minutes=50, seconds=n)
                delivered = window + timedelta(seconds=10 * n + 5)
                row = _order(oid, created, "north", 1 + n % 12, window + timedelta(minutes=1))
                change(row, created, op="c")
                change(row, delivered, status="delivered", delivered_at=iso(delivered))
        # Left open past the promise; one deleted and one cancelled while overdue.
        for n, fate in enumerate(("open", "open", "deleted", "cancelled")):
            oid += 1
            created = day_start + timedelta(hours=10, minutes=5 + n)
            row = _order(oid, created, "east", 12, created + timedelta(minutes=30))
            change(row, created, op="c")
            change(row, created + timedelta(minutes=5), status="in_transit")
            if fate == "deleted":
                events.append(("orders", created + timedelta(minutes=70), {"op": "d", "before": {"order_id": oid}}))
            elif fate == "cancelled":
                change(row, created + timedelta(minutes=80), status="cancelled")

    events.sort(key=lambda e: (e[1], e[0]))
    hours = [start + timedelta(days=d, hours=h) for d in range(DAYS) for h in DAY_HOURS]
    world = World(hours=hours)
    lsn = 1000
    for table, at, payload in events:
        lsn += 10
        if table == "tracking_pings":
            line = dump(payload["row"])
        else:
            line = dump(cdc(payload["op"], table, payload.get("after"), before=payload.get("before"), lsn=lsn, ts=at))
        natural = next((i for i, h in enumerate(hours) if h + timedelta(hours=1) > at), len(hours) - 1)
        roll = rng.random()
        delay = 1 if roll < 0.1 else (3 if roll < 0.16 else 0)  # out of order; late beyond L = 2h
        for index in {natural + delay, natural + delay + (rng.randrange(0, 3) if rng.random() < 0.06 else 0)}:
            arrival = hours[min(index, len(hours) - 1)]
            world.lines.setdefault((TOPIC_OF[table], arrival), []).append(line)
    return world
