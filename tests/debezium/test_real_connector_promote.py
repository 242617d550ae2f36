"""Types the source widens, through the real Debezium 3.6 PostgreSQL connector (issue #36): ``total_amount`` and
``amount`` go from ``numeric(12,2)`` to ``numeric(14,2)`` and take 123456789012.34, and an added ``integer`` column
becomes ``bigint`` and takes 5,000,000,000, while the platform runs (docs/contract/sources.md, "Types that widen").

One engine run captures the workload under every converter config; each config lands it in the open hour in two
parts, what the connector sent before the ALTERs and what it sent after. The connector and Kafka Connect at their
defaults (precise decimals, JSON with schemas) go through a ``run`` after each part as the landing sensor does: bronze
promotes its columns in place in the second run (an append: no rebuild, nothing quarantined), staging and the
intermediate models hold the widened values and are widened in place themselves, the marts equal PostgreSQL after
each run, and every landed record is one bronze row. The other configs are ingested part by part and promote the same
columns in place, to the same bronze rows, so the same marts.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.cli.render import render_summary
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import Settings, local_settings
from tests.debezium.workload import oltp_database, table_rows
from tests.support.bronze_equality import assert_same_bronze
from tests.support.connect_sink import land
from tests.support.debezium import ENGINE_MARKS, Captured, ConverterConfig, Record, capture

pytestmark = ENGINE_MARKS

# One config per way a widened type reaches bronze: the values alone (schemaless JSON), a Connect schema block that
# declares the new precision, an Avro writer schema. The other two JSON configs read like these (test_real_connector
# compares all five).
CONFIGS = (
    ConverterConfig("string", "json", schemas_enable=False),
    ConverterConfig("precise", "json", schemas_enable=True),
    ConverterConfig("precise", "avro"),
)
DEFAULTS = CONFIGS[1]  # the one taken through the pipeline
BIG = Decimal("123456789012.34")  # numeric(14,2): two integer digits more than numeric(12,2) holds
FITS = Decimal("1234567890.12")  # what the order is corrected to: the marts' DECIMAL(12,2) holds it
BIG_PRIORITY = 5_000_000_000  # beyond 32 bits
BIG_ID = 950_001  # the order and the payment that take the wide values


@dataclass
class World:
    """What the engine captured per config, the transaction id before the ALTERs, and the tables before and after."""

    captured: dict[ConverterConfig, Captured]
    split_tx: int
    before: dict[str, list[tuple[Any, ...]]]
    after: dict[str, list[tuple[Any, ...]]]


def tables_now(conn: Any) -> dict[str, list[tuple[Any, ...]]]:
    return {t: table_rows(conn, t, cols, KEYS[t]) for t, cols in TABLES.items()}


def widening_workload(conn: Any, state: dict[str, Any]) -> None:
    """Changes; the ALTERs (a column added as integer, both amounts to numeric(14,2)); changes of every kind with
    the wider types; then the wide values: an order and its payment of 123456789012.34, the added column to bigint
    and 5,000,000,000 in it, the order corrected to an amount the marts hold (its payment keeps the wide one)."""
    simulate(conn, 150, seed=2)
    state["before"] = tables_now(conn)
    with conn.cursor() as cur:
        cur.execute("select txid_current()")  # every earlier transaction has a smaller id, every later one a larger
        state["split_tx"] = cur.fetchone()[0]
        cur.execute("alter table orders add column priority integer")
        cur.execute("alter table orders alter column total_amount type numeric(14, 2)")
        cur.execute("alter table payments alter column amount type numeric(14, 2)")
    conn.commit()
    simulate(conn, 100, seed=4)
    steps = [
        (
            "insert into orders (order_id, tenant_id, courier_id, region, status, total_amount, delivery_fee,"
            " created_at, promised_at, delivered_at, updated_at, priority) values (%s, 't001', null, 'north',"
            " 'created', %s, 0.01, clock_timestamp(), clock_timestamp() + interval '45 minutes', null,"
            " clock_timestamp(), 7)",
            (BIG_ID, BIG),
        ),
        (
            "insert into payments values (%s, %s, %s, 'card', 'authorized', clock_timestamp(), clock_timestamp())",
            (BIG_ID, BIG_ID, BIG),
        ),
        ("alter table orders alter column priority type bigint", ()),
        ("update orders set priority = %s, updated_at = clock_timestamp() where order_id = %s", (BIG_PRIORITY, BIG_ID)),
        ("update orders set total_amount = %s, updated_at = clock_timestamp() where order_id = %s", (FITS, BIG_ID)),
    ]
    with conn.cursor() as cur:
        for sql, params in steps:
            cur.execute(sql, params)
            conn.commit()
            time.sleep(0.005)  # event time has millisecond precision: two versions in one millisecond would tie
    state["after"] = tables_now(conn)


@pytest.fixture(scope="module")
def world() -> World:
    """The workload captured once by the real connector under every config of the module."""
    state: dict[str, Any] = {}
    with oltp_database() as db:
        captured = capture(db, CONFIGS, lambda conn: widening_workload(conn, state))
    return World(captured, state["split_tx"], state["before"], state["after"])


def parts(world: World, config: ConverterConfig) -> tuple[Captured, Captured]:
    """The config's records sent before the ALTERs and after, per topic at the position the JSON of the same engine
    shows (every config saw the same changes in the same order; a tombstone goes with its delete)."""
    reference = world.captured[CONFIGS[0]].by_topic()
    cut: dict[str, int] = {}
    for topic, records in reference.items():
        tx_ids = [json.loads(r.value)["source"]["txId"] if r.value is not None else None for r in records]
        later = [i for i, tx in enumerate(tx_ids) if tx is not None and tx > world.split_tx]
        cut[topic] = later[0] if later else len(records)
    captured = world.captured[config]
    by_topic = captured.by_topic()
    assert {t: len(rs) for t, rs in by_topic.items()} == {t: len(rs) for t, rs in reference.items()}
    first: list[Record] = [r for t, rs in by_topic.items() for r in rs[: cut[t]]]
    second: list[Record] = [r for t, rs in by_topic.items() for r in rs[cut[t] :]]
    return Captured(config, first, captured.schemas), Captured(config, second, captured.schemas)


@dataclass
class Phase:
    """What one run left: its summary ok, the quarantine, and DuckDB's view of bronze, staging and the marts."""

    landed: Counter[str]
    bronze_rows: dict[str, int]
    quarantined: int
    marts: dict[str, list[tuple[Any, ...]]]
    payments: list[tuple[Any, ...]]
    types: dict[str, str]
    big_order_history: list[tuple[Any, ...]]
    orders_ingest_mode: str


def run_phase(settings: Settings, captured: Captured, hour: datetime, landed: Counter[str]) -> Phase:
    land(captured, settings.landing_dir, hour)
    landed.update(r.topic.rsplit(".", 1)[1] for r in captured.records if r.value is not None)
    summary = run_pipeline(settings)
    assert summary.ok, render_summary(summary)
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        bronze_rows = {t: duck.execute(f"select count(*) from bronze.{t}").fetchone()[0] for t in TABLES}
        (quarantined,) = duck.execute("select count(*) from bronze.quarantine").fetchone()
        marts = {
            "orders": duck.execute(f"select {', '.join(TABLES['orders'])} from marts.fct_orders order by 1").fetchall(),
            "couriers": duck.execute(
                "select courier_id, name, region, vehicle, active from marts.dim_courier order by 1"
            ).fetchall(),
            "tenants": duck.execute(
                "select tenant_id, name, tier, region from marts.dim_tenant where is_current order by 1"
            ).fetchall(),
        }
        payments = duck.execute(
            f"select {', '.join(TABLES['payments'])} from intermediate.int_payments_current"
            " where not is_deleted order by 1"
        ).fetchall()
        types = {
            f"{schema}.{table}.{column}": str(kind).lower()
            for schema, table, column, kind in duck.execute(
                "select table_schema, table_name, column_name, data_type from information_schema.columns"
                " where column_name in ('total_amount', 'amount', 'priority')"
                " and table_schema in ('bronze', 'staging', 'intermediate', 'marts')"
            ).fetchall()
        }
        history = (
            duck.execute(
                "select total_amount, priority from staging.stg_orders where order_id = ? order by _lsn", [BIG_ID]
            ).fetchall()
            if "staging.stg_orders.priority" in types
            else []
        )
    finally:
        duck.close()
    snapshot = load_catalog(settings).load_table("bronze.orders").current_snapshot()
    mode = snapshot.summary.get("logistics.ingest-mode", "") if snapshot is not None and snapshot.summary else ""
    return Phase(Counter(landed), bronze_rows, quarantined, marts, payments, types, history, mode)


@pytest.fixture(scope="module")
def phases(
    world: World, landing_hour: datetime, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Settings, list[Phase]]:
    """The defaults config: the run after the first part landed, and the run after the second part landed too."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DAGSTER_HOME", raising=False)  # an ephemeral Dagster instance per run
        settings = local_settings(tmp_path_factory.mktemp(DEFAULTS.name))
        first, second = parts(world, DEFAULTS)
        landed: Counter[str] = Counter()
        return settings, [
            run_phase(settings, first, landing_hour, landed),
            run_phase(settings, second, landing_hour, landed),
        ]


def current(tables: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    """The PostgreSQL tables as the marts compared here hold them."""
    return {
        "orders": tables["orders"],
        "couriers": [r[:5] for r in tables["couriers"]],
        "tenants": [r[:4] for r in tables["tenants"]],
    }


def differing(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> str:
    """The rows of one side only, for the assertion message."""
    return (
        f"only in the mart: {sorted(set(got) - set(want))[:5]}; only in PostgreSQL: {sorted(set(want) - set(got))[:5]}"
    )


def test_widened_types_are_promoted_and_the_marts_equal_postgresql(
    world: World, phases: tuple[Settings, list[Phase]]
) -> None:
    before, after = phases[1]
    # Before the ALTERs: the contract's types everywhere, the marts equal to the tables as they were.
    assert before.quarantined == 0 and before.bronze_rows == {t: before.landed[t] for t in TABLES}
    want = current(world.before)
    assert before.marts["orders"] == want["orders"], differing(before.marts["orders"], want["orders"])
    assert before.marts == want and before.payments == world.before["payments"]
    assert before.types["bronze.orders.total_amount"] == "decimal(12,2)"
    assert before.types["staging.stg_orders.total_amount"] == "decimal(12,2)"
    # After: the second part appended to the hour (no rebuild), bronze promoted in place, nothing quarantined, every
    # landed record one bronze row.
    assert after.orders_ingest_mode == "append"
    assert after.quarantined == 0 and after.bronze_rows == {t: after.landed[t] for t in TABLES}
    assert sum(after.landed.values()) > sum(before.landed.values()) + 100
    for column in ("bronze.orders.total_amount", "bronze.payments.amount"):
        assert after.types[column] == "decimal(14,2)", column
    assert after.types["bronze.orders.priority"] == "bigint"  # bronze's integer columns are long from the start
    # Staging and the intermediate models hold the wider values: widened in place by the run.
    for column in ("staging.stg_orders.total_amount", "staging.stg_payments.amount"):
        assert after.types[column] == "decimal(14,2)", column
    for column in ("intermediate.int_orders_current.total_amount", "intermediate.int_payments_current.amount"):
        assert after.types[column] == "decimal(14,2)", column
    assert after.big_order_history == [(BIG, 7), (BIG, BIG_PRIORITY), (FITS, BIG_PRIORITY)]
    # The marts keep their contract's DECIMAL(12,2) and equal PostgreSQL; the payment's wide amount is current.
    assert after.types["marts.fct_orders.total_amount"] == "decimal(12,2)"
    want = current(world.after)
    assert after.marts["orders"] == want["orders"], differing(after.marts["orders"], want["orders"])
    assert after.marts == want and after.payments == world.after["payments"]
    assert (BIG_ID, BIG_ID, BIG) in [r[:3] for r in after.payments]


def bronze_types(settings: Settings) -> dict[str, str]:
    """bronze.<table>.<column> -> Iceberg type, for the columns the workload widens."""
    catalog = load_catalog(settings)
    return {
        f"bronze.{table}.{field.name}": str(field.field_type)
        for table in ("orders", "payments")
        for field in catalog.load_table(("bronze", table)).schema().fields
        if field.name in ("total_amount", "amount", "priority")
    }


@pytest.mark.parametrize("config", [c for c in CONFIGS if c != DEFAULTS], ids=lambda c: c.name)
def test_every_config_promotes_bronze_in_place_to_the_rows_of_the_defaults(
    world: World, phases: tuple[Settings, list[Phase]], landing_hour: datetime, config: ConverterConfig, tmp_path: Path
) -> None:
    settings = local_settings(tmp_path)
    first, second = parts(world, config)
    land(first, settings.landing_dir, landing_hour)
    ingest_hour(settings, landing_hour)
    assert bronze_types(settings) == {
        "bronze.orders.total_amount": "decimal(12, 2)",
        "bronze.payments.amount": "decimal(12, 2)",
    }
    land(second, settings.landing_dir, landing_hour)
    ingest_hour(settings, landing_hour)
    snapshot = load_catalog(settings).load_table("bronze.orders").current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.get("logistics.ingest-mode") == "append"  # promoted in place, not rebuilt
    assert bronze_types(settings) == {
        "bronze.orders.total_amount": "decimal(14, 2)",
        "bronze.orders.priority": "long",
        "bronze.payments.amount": "decimal(14, 2)",
    }
    landed = Counter(r.topic.rsplit(".", 1)[1] for part in (first, second) for r in part.records if r.value is not None)
    assert assert_same_bronze(phases[0], settings, TABLES) == {t: landed[t] for t in TABLES}
