"""DuckDB marts with exactly their dbt contract's columns and small consistent rows (revenue reconciles), for
publish tests that must inject a violation the dbt build would not let through."""

from __future__ import annotations

import duckdb

from logistics_platform.lib.transform.audit import load_contract
from logistics_platform.lib.transform.project import MART_MODELS

ORDERS = 240  # more than ROW_DROP_MIN_ROWS, so that the drop bound applies to fct_orders

# Rows of each mart by position of its contract columns; revenue reconciles with orders and deliveries.
MART_ROWS = {
    "fct_orders": f"""
        select i, 't-' || (i % 3), i % 5, 'r-' || (i % 2), case when i % 2 = 0 then 'delivered' else 'created' end,
            10 + i / 100, 2, t, t + interval 60 minute,
            case when i % 2 = 0 then t + interval 30 minute end, t, i
        from (select i, timestamp '2026-11-01 08:00:00' + to_minutes(i) as t from range(1, {ORDERS + 1}) r(i))
    """,
    "dim_tenant": """
        select 't-' || i, 'Tenant ' || i, 'gold', 'r-a', timestamp '2026-10-01', null, true from range(3) r(i)
    """,
    "dim_courier": "select i, 'Courier ' || i, 'r-a', 'bike', true from range(5) r(i)",
    "fct_deliveries": """
        select order_id, tenant_id, courier_id, region, created_at, promised_at, delivered_at, 30, 0, true
        from marts.fct_orders where status = 'delivered'
    """,
    "fct_daily_revenue": """
        select cast(d.delivered_at as date), d.tenant_id, count(*), sum(o.total_amount), sum(o.delivery_fee),
            sum(round(o.total_amount * 0.10, 2)),
            sum(o.total_amount) - sum(o.delivery_fee) - sum(round(o.total_amount * 0.10, 2))
        from marts.fct_deliveries d join marts.fct_orders o using (order_id) group by all
    """,
    "fct_hourly_region_orders": """
        select timestamp '2026-11-01 08:00:00' + to_hours(i), 'r-a', 10, 5, 1 from range(6) r(i)
    """,
    "fct_courier_hourly_activity": """
        select timestamp '2026-11-01 08:00:00', i, 12, timestamp '2026-11-01 08:01:00', timestamp '2026-11-01 08:59:00'
        from range(5) r(i)
    """,
    "fct_region_sla": """
        select timestamp '2026-11-01 08:00:00' + to_minutes(5 * i), 'r-a', 4, 1, 0.25, 0, false from range(6) r(i)
    """,
    "fct_region_delivery_daily": """
        select date '2026-11-01' + cast(i as integer), 'r-a', 12, 31.5, i, null, null, false from range(3) r(i)
    """,
    "fct_courier_gps_jumps": """
        select 1, 'p-' || (i + 1), 'p-' || i, timestamp '2026-11-01 08:00:10' + to_seconds(i),
            timestamp '2026-11-01 08:00:00' + to_seconds(i), 5.0, 1800.0
        from range(4) r(i)
    """,
    "fct_courier_off_route": """
        select 1, 100 + i, timestamp '2026-11-01 08:00:00' + to_minutes(20 * i),
            case when i < 2 then timestamp '2026-11-01 08:07:00' + to_minutes(20 * i) end, 7.0, 4, 2.5, 'r-a'
        from range(3) r(i)
    """,
    "late_events": """
        select 'logistics.tracking_pings', 'e-1', 'p-1', null, 'c', timestamp '2026-11-01 07:00:00',
            timestamp '2026-11-01 10:00:00', 10800, timestamp '2026-11-01 07:00:00', 'fct_courier_hourly_activity',
            'late_beyond_tolerance'
    """,
}


def build_marts(con: duckdb.DuckDBPyConnection, empty: bool = False) -> None:
    """(Re)create every mart in DuckDB with exactly its dbt contract's columns and types."""
    con.execute("create schema if not exists marts")
    for mart in MART_MODELS:
        columns = ", ".join(f'"{name}" {data_type}' for name, data_type in load_contract(mart).columns)
        con.execute(f"create or replace table marts.{mart} ({columns})")
        if not empty:
            con.execute(f"insert into marts.{mart} {MART_ROWS[mart]}")


def keep_orders(con: duckdb.DuckDBPyConnection, orders: int) -> None:
    """Keep the first ``orders`` orders, with the deliveries and daily revenue that stay consistent with them."""
    con.execute(f"delete from marts.fct_orders where order_id > {orders}")
    con.execute("delete from marts.fct_deliveries where order_id not in (select order_id from marts.fct_orders)")
    con.execute("delete from marts.fct_daily_revenue")
    con.execute(f"insert into marts.fct_daily_revenue {MART_ROWS['fct_daily_revenue']}")
