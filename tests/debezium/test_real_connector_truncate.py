"""TRUNCATE through the real Debezium 3.6 PostgreSQL connector with ``skipped.operations=none`` (issue #36): the
op ``t`` records land in the open hour and the current-state marts equal the PostgreSQL tables, with every landed
record accounted for (docs/contract/sources.md, §7). One engine run for both converter configs: the JSON one goes
through the pipeline; the Avro one gives the same bronze rows, truncates included, so the same marts."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.cli.render import render_summary
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.lib.connections import connect
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import Settings, local_settings
from tests.debezium.workload import oltp_database, table_rows
from tests.support.bronze_equality import assert_same_bronze
from tests.support.connect_sink import land
from tests.support.debezium import ENGINE_MARKS, ConverterConfig, capture

pytestmark = ENGINE_MARKS

PRECISE_JSON = ConverterConfig("precise", "json", schemas_enable=False)
PRECISE_AVRO = ConverterConfig("precise", "avro")


def truncating_workload(conn: Any) -> None:
    """Changes, TRUNCATE payments, more changes, TRUNCATE orders and payments (keys then start again at 1), more."""
    for step, seed in (("truncate payments", 2), ("truncate orders, payments", 4), (None, 5)):
        simulate(conn, 150, seed=seed)
        if step:
            with conn.cursor() as cur:
                cur.execute(step)
            conn.commit()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with oltp_database() as db:
        captured = capture(db, (PRECISE_JSON, PRECISE_AVRO), truncating_workload, skipped_operations="none")
        conn = db.connect()
        try:
            tables = {t: table_rows(conn, t, cols, KEYS[t]) for t, cols in TABLES.items()}
        finally:
            conn.close()
    return captured, tables


@pytest.fixture(scope="module")
def json_run(world: Any, landing_hour: datetime, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The JSON config's records landed and run through `logistics-platform run`'s pipeline."""
    captured, _ = world
    settings = local_settings(tmp_path_factory.mktemp(PRECISE_JSON.name))
    land(captured[PRECISE_JSON], settings.landing_dir, landing_hour)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DAGSTER_HOME", raising=False)  # an ephemeral Dagster instance for the run
        summary = run_pipeline(settings)
    assert summary.ok, render_summary(summary)
    return settings


def test_truncates_leave_the_current_state_marts_equal_to_postgresql(world: Any, json_run: Settings) -> None:
    captured, tables = world
    records = captured[PRECISE_JSON].records
    truncates = [json.loads(r.value) for r in records if r.value and b'"op":"t"' in r.value]
    # One event per table of a statement: before and after null, the table and position in source.
    assert sorted(e["source"]["table"] for e in truncates) == ["orders", "payments", "payments"]
    assert all(e["before"] is None and e["after"] is None for e in truncates)
    settings = json_run
    landed = Counter(r.topic.rsplit(".", 1)[1] for r in records if r.value is not None)
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        # Exact accounting: every landed record is one bronze row, none quarantined, the truncates among them.
        assert duck.execute("select count(*) from bronze.quarantine").fetchone() == (0,)
        for table in TABLES:
            assert duck.execute(f"select count(*) from bronze.{table}").fetchone() == (landed[table],), table
        ops = dict(duck.execute("select _topic, count(*) from bronze.payments where _op = 't' group by 1").fetchall())
        assert ops == {"oltp.public.payments": 2}
        history = duck.execute(
            "select table_name from intermediate.int_truncates order by truncate_lsn, table_name"
        ).fetchall()
        assert history == [("payments",), ("orders",), ("payments",)]
        orders = duck.execute(f"select {', '.join(TABLES['orders'])} from marts.fct_orders order by 1").fetchall()
        payments = duck.execute(
            f"select {', '.join(TABLES['payments'])} from intermediate.int_payments_current"
            " where not is_deleted order by 1"
        ).fetchall()
        couriers = duck.execute("select courier_id, name, region, vehicle, active from marts.dim_courier order by 1")
        current = {"couriers": couriers.fetchall()}
        tenants = duck.execute("select tenant_id, name, tier, region from marts.dim_tenant where is_current order by 1")
        current["tenants"] = tenants.fetchall()
    finally:
        duck.close()
    assert orders == tables["orders"] and len(orders) > 20
    assert payments == tables["payments"] and len(payments) > 20
    assert current["couriers"] == [r[:5] for r in tables["couriers"]]
    assert current["tenants"] == [r[:4] for r in tables["tenants"]]


def test_avro_gives_the_bronze_rows_of_json_truncates_included(
    world: Any, json_run: Settings, landing_hour: datetime, tmp_path: Path
) -> None:
    captured, _ = world
    settings = local_settings(tmp_path)
    land(captured[PRECISE_AVRO], settings.landing_dir, landing_hour)
    ingest_hour(settings, landing_hour)
    landed = Counter(r.topic.rsplit(".", 1)[1] for r in captured[PRECISE_AVRO].records if r.value is not None)
    assert assert_same_bronze(json_run, settings, TABLES) == {t: landed[t] for t in TABLES}
