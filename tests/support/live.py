"""Order changes a live sink lands in the hour in progress: a region's SLA window with late (or on-time) deliveries."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.support.bronze import cdc, dump, iso


def window_deliveries(
    window_start: datetime, region: str, first_order: int, count: int, late: bool, lsn: int
) -> list[bytes]:
    """Insert and delivery lines of ``count`` orders of ``region`` delivered in the 5-minute window from
    ``window_start``, all after their promise (``late``) or all before it."""
    lines = []
    promised = window_start + (timedelta(seconds=30) if late else timedelta(minutes=5))
    for n in range(count):
        oid = first_order + n
        created = window_start - timedelta(minutes=40, seconds=n)
        delivered = window_start + timedelta(seconds=60 + 5 * n)
        row = {
            "order_id": oid,
            "tenant_id": "t-001",
            "courier_id": 1 + n % 12,
            "region": region,
            "status": "created",
            "total_amount": "50.00",
            "delivery_fee": "5.00",
            "created_at": iso(created),
            "promised_at": iso(promised),
            "delivered_at": None,
            "updated_at": iso(created),
        }
        lines.append(dump(cdc("c", "orders", row, lsn=lsn + 20 * n, ts=created)))
        done = {**row, "status": "delivered", "delivered_at": iso(delivered), "updated_at": iso(delivered)}
        lines.append(dump(cdc("u", "orders", done, lsn=lsn + 20 * n + 10, ts=delivered)))
    return lines
