"""Helpers of the capture tests: read what landed, and compare it with the OLTP database."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from logistics_platform.lib.bronze.landing import list_arrival_hours, list_hour_files
from logistics_platform.lib.contract import ORDER_COORDINATES
from logistics_platform.settings import Settings


def landed_events(landing_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(topic, envelope) of every landed line that is not a tombstone, in landing order."""
    out = []
    for hour in list_arrival_hours(landing_dir):
        for topic_dir in sorted((landing_dir / "topics").iterdir()):
            for f in list_hour_files(landing_dir, topic_dir.name, hour):
                with f.open() as fh:
                    for line in fh:
                        value = json.loads(line)
                        if value is not None:
                            out.append((f.topic, value))
    return out


def identities(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any, int, str]]:
    """The event identity of the contract, (topic, key, lsn, op), of every landed event."""
    keys = {"tenants": "tenant_id", "couriers": "courier_id", "orders": "order_id", "payments": "payment_id"}
    out = []
    for topic, e in events:
        table = topic.rsplit(".", 1)[1]
        row = e["after"] if e["op"] != "d" else e["before"]
        out.append((topic, row[keys[table]], e["source"]["lsn"], e["op"]))
    return out


def replay(events: list[tuple[str, dict[str, Any]]], table: str, key: str) -> dict[Any, dict[str, Any]]:
    """Current state of one table from its events: highest source.lsn wins, deletes remove."""
    best: dict[Any, tuple[int, dict[str, Any] | None]] = {}
    for topic, e in events:
        if topic != f"oltp.public.{table}":
            continue
        row = e["after"] if e["op"] != "d" else e["before"]
        k = row[key]
        lsn = e["source"]["lsn"]
        if k not in best or best[k][0] < lsn:
            best[k] = (lsn, None if e["op"] == "d" else e["after"])
    return {k: v for k, (_lsn, v) in best.items() if v is not None}


def naive_utc(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def encoded(value: Any) -> Any:
    """A database value as the envelope encodes it."""
    from logistics_platform.lib.capture.envelope import to_json_value

    return to_json_value(value)


def table_rows(conn: Any, table: str, columns: tuple[str, ...], key: str) -> dict[Any, dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute(f"select {', '.join(columns)} from {table} order by {key}")
        rows = {r[0]: {c: encoded(v) for c, v in zip(columns, r, strict=True)} for r in cur.fetchall()}
    conn.commit()
    return rows


def fct_orders_equals_oltp(settings: Settings, conn: Any) -> int:
    """marts.fct_orders equals the OLTP orders table, column by column; returns its row count."""
    from logistics_platform.lib.capture.schema import TABLES
    from logistics_platform.lib.connections import connect

    cols = TABLES["orders"]
    with conn.cursor() as cur:
        cur.execute(f"select {', '.join(cols)} from orders order by order_id")
        expected = [tuple(naive_utc(v) for v in r) for r in cur.fetchall()]
    conn.commit()
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        got = duck.execute(f"select {', '.join(cols)} from marts.fct_orders order by order_id").fetchall()
    finally:
        duck.close()
    got = [tuple(naive_utc(Decimal(str(v)) if isinstance(v, float) else v) for v in r) for r in got]
    assert got == expected
    return len(got)


def coordinates_equal_oltp(settings: Settings, conn: Any) -> tuple[int, int]:
    """intermediate.int_orders_current has the OLTP orders' coordinates (null where the row has none, or where the
    table had no such columns yet); returns how many orders have them and how many do not."""
    from logistics_platform.lib.connections import connect

    cols = "order_id, " + ", ".join(ORDER_COORDINATES)
    with conn.cursor() as cur:
        cur.execute("select * from orders limit 0")
        has = "pickup_lat" in {d.name for d in cur.description}
        cur.execute(f"select {cols if has else 'order_id, null, null, null, null'} from orders order by order_id")
        expected = cur.fetchall()
    conn.commit()
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        sql = f"select {cols} from intermediate.int_orders_current where not is_deleted order by order_id"
        got = duck.execute(sql).fetchall()
    finally:
        duck.close()
    assert got == expected
    with_xy = sum(1 for r in got if r[1] is not None)
    return with_xy, len(got) - with_xy
