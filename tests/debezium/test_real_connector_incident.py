"""Schema incidents through the real Debezium 3.6 PostgreSQL connector (issue #36), landed in the open hour:
``orders.priority integer`` is dropped and added again as ``text``, and the contract column ``orders.region`` is
renamed to ``zone`` for a while (then back). The lines of the new type and those without ``region`` are quarantined
whole, the ``schema_incident`` check fails at ERROR and the alert names table, column, types and the first position;
after `logistics-platform run --accept-type orders.priority` and `--accept-rename orders.region=zone`
(docs/operations.md, "Schema incidents") the marts equal PostgreSQL with every landed record accounted for once. One
engine run for both converter configs: the JSON one goes through the pipeline and the way out; the Avro one (the
registry's next writer schemas) quarantines the same lines and, after the same two acceptances, gives the same bronze
rows, so the same marts."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from logistics_platform.cli import main
from logistics_platform.cli.render import render_summary
from logistics_platform.definitions import build_definitions
from logistics_platform.defs.bronze.checks import CHECK_SCHEMA_INCIDENT
from logistics_platform.defs.bronze.keys import TOPIC_KEYS
from logistics_platform.defs.operate.alert_sensors import deliver_check_alerts
from logistics_platform.lib.bronze.accounting import account_hours
from logistics_platform.lib.bronze.incidents import accept_as_text, accept_rename, replayed
from logistics_platform.lib.bronze.ingest import ingest_hour, ingest_hours
from logistics_platform.lib.bronze.schema import QUARANTINE_TABLE
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.operate.alerts import read_log
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import VARIABLES, Settings, local_settings
from tests.debezium.test_real_connector import newest_hour
from tests.debezium.workload import oltp_database, table_rows
from tests.support.bronze_equality import assert_same_bronze
from tests.support.connect_sink import land
from tests.support.debezium import ENGINE_MARKS, ConverterConfig, capture

pytestmark = ENGINE_MARKS

STRING_JSON = ConverterConfig("string", "json", schemas_enable=False)
PRECISE_AVRO = ConverterConfig("precise", "avro")
NEW_ORDER = 900_001
FIRST_ORDERS = "(select order_id from orders order by order_id limit {})"
RENAMED_ORDERS = "(select order_id from orders order by order_id offset 5 limit 3)"


def incident_workload(conn: Any) -> None:
    """Changes; priority added as integer and set on five orders; dropped and added again as text, then set on two
    existing orders (which go stale in the marts until the way out) and on a new one (missing until then); region
    renamed to zone, set on three other orders (stale until the rename is accepted), and renamed back."""
    simulate(conn, 150, seed=2)
    with conn.cursor() as cur:
        cur.execute("alter table orders add column priority integer")
        conn.commit()
        cur.execute(f"update orders set priority = order_id % 3 where order_id in {FIRST_ORDERS.format(5)}")
        conn.commit()
        cur.execute("alter table orders drop column priority")
        cur.execute("alter table orders add column priority text")
        conn.commit()
        now = "clock_timestamp()"
        cur.execute(
            f"update orders set priority = 'high', updated_at = {now} where order_id in {FIRST_ORDERS.format(2)}"
        )
        cols = ", ".join((*TABLES["orders"], "priority"))
        cur.execute(
            f"insert into orders ({cols}) values (%s, 't001', null, 'north', 'created', 10.00, 1.50, {now},"
            f" date_trunc('second', {now}) + interval '45 minutes', null, {now}, 'urgent')",
            (NEW_ORDER,),
        )
        conn.commit()
        cur.execute("alter table orders rename column region to zone")
        conn.commit()
        cur.execute(
            f"update orders set zone = 'south-' || order_id, updated_at = {now} where order_id in {RENAMED_ORDERS}"
        )
        conn.commit()
        cur.execute("alter table orders rename column zone to region")
        conn.commit()


@pytest.fixture(scope="module")
def world() -> Any:
    with oltp_database() as db:
        captured = capture(db, (STRING_JSON, PRECISE_AVRO), incident_workload)
        conn = db.connect()
        try:
            tables = {t: table_rows(conn, t, cols, KEYS[t]) for t, cols in TABLES.items()}
        finally:
            conn.close()
    return captured, tables


def fct_orders(settings: Settings) -> dict[int, tuple[Any, ...]]:
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        rows = duck.execute(f"select {', '.join(TABLES['orders'])} from marts.fct_orders").fetchall()
    finally:
        duck.close()
    return {r[0]: r for r in rows}


def test_an_incompatible_type_is_an_incident_and_the_way_out_brings_the_marts_back(
    world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured, tables = world
    config = STRING_JSON
    home = tmp_path / "dagster_home"
    home.mkdir()
    settings = local_settings(tmp_path / "platform", dagster_home=home)
    for field in ("landing_dir", "catalog_uri", "warehouse", "duckdb_path", "alerts_log", "dagster_home"):
        monkeypatch.setenv(VARIABLES[field], str(getattr(settings, field)))
    hour = newest_hour(settings)
    land(captured[config], settings.landing_dir, hour)  # the open hour, as a live sink does
    summary = run_pipeline(settings)
    assert summary.ok, render_summary(summary)
    expected = {r[0]: r for r in tables["orders"]}

    # The incidents: five orders stale, one missing, the lines quarantined whole, the ERROR check failed.
    before = fct_orders(settings)
    stale = {k for k in expected if before.get(k) != expected[k]}
    assert NEW_ORDER in stale and NEW_ORDER not in before and len(stale) == 6, stale
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        quarantined = duck.execute("select reason, raw_line from bronze.quarantine").fetchall()
    finally:
        duck.close()
    assert Counter(r for r, _ in quarantined) == {"incompatible_type:priority": 3, "incompatible_type:region": 3}
    after = [json.loads(raw)["after"] for _, raw in quarantined]
    assert {a["priority"] for a in after if "region" in a} == {"high", "urgent"}
    renamed = {a["order_id"] for a in after if "region" not in a}
    assert {a["zone"] for a in after if "region" not in a} == {f"south-{k}" for k in renamed}
    instance = dg.DagsterInstance.get()
    key = dg.AssetCheckKey(TOPIC_KEYS["orders"], CHECK_SCHEMA_INCIDENT)
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    assert record.status.value == "FAILED"
    check_keys = list(build_definitions(settings).resolve_asset_graph().asset_check_keys)
    sent, cursor = deliver_check_alerts(instance, check_keys, None, settings)
    alerts = [a for a in read_log(settings.alerts_log) if a.get("check_name") == CHECK_SCHEMA_INCIDENT]
    assert sent >= 1 and len(alerts) == 1, read_log(settings.alerts_log)
    text = alerts[0]["error"]
    for needle in (
        "bronze.orders.priority",
        "long -> string",
        "topics/oltp.public.orders/",
        " line ",
        "--accept-type orders.priority",
        "bronze.orders.region is missing from the source's rows, which carry a new column zone",
        "--accept-rename orders.region=zone",
    ):
        assert needle in text, text

    # The ways out: the column accepted as text, then the rename; the hours re-ingested whole, the marts built again.
    assert main(["run", "--accept-type", "orders.priority"]) == 0
    now = fct_orders(settings)
    assert {k for k in expected if now.get(k) != expected[k]} == renamed
    _, cursor = deliver_check_alerts(instance, check_keys, cursor, settings)  # it fails still, on the rename alone
    alerts = [a for a in read_log(settings.alerts_log) if a.get("check_name") == CHECK_SCHEMA_INCIDENT]
    assert len(alerts) == 2 and "priority" not in alerts[1]["error"] and "region" in alerts[1]["error"], alerts
    assert main(["run", "--accept-rename", "orders.region=zone"]) == 0
    assert fct_orders(settings) == expected
    landed = Counter(r.topic.rsplit(".", 1)[1] for r in captured[config].records if r.value is not None)
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        assert duck.execute("select count(*) from bronze.quarantine").fetchone() == (0,)
        for table in TABLES:
            assert duck.execute(f"select count(*) from bronze.{table}").fetchone() == (landed[table],), table
        got = duck.execute("select priority, count(*) from bronze.orders group by 1 order by 1").fetchall()
        columns = [r[0] for r in duck.execute("describe bronze.orders").fetchall()]
    finally:
        duck.close()
    assert ("high", 2) in got and ("urgent", 1) in got and sum(n for p, n in got if p in ("0", "1", "2")) == 5
    assert "zone" not in columns  # the new name is read as the contract column, not added beside it
    accounts = account_hours(settings, [hour])[hour]
    assert all(a.balanced and a.quarantine_rows == 0 for a in accounts.values()), accounts
    assert main(["verify"]) == 0
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key])[key]
    assert record.status.value == "SUCCEEDED"
    deliver_check_alerts(instance, check_keys, cursor, settings)
    assert [a["check_name"] for a in read_log(settings.alerts_log)].count(CHECK_SCHEMA_INCIDENT) == 2


def test_avro_quarantines_the_same_lines_and_the_same_way_out_gives_the_same_bronze(
    world: Any, landing_hour: datetime, tmp_path: Path
) -> None:
    captured, _ = world
    hour = landing_hour
    sides = {}
    for config in (STRING_JSON, PRECISE_AVRO):
        settings = local_settings(tmp_path / config.name)
        land(captured[config], settings.landing_dir, hour)
        ingest_hour(settings, hour)
        catalog = load_catalog(settings)
        reasons = Counter(catalog.load_table(("bronze", QUARANTINE_TABLE)).scan().to_arrow()["reason"].to_pylist())
        assert reasons == {"incompatible_type:priority": 3, "incompatible_type:region": 3}, (config.name, reasons)
        # The ways out as `run --accept-type` and `--accept-rename` take them: accepted, then the hours re-read whole.
        assert accept_as_text(catalog, "orders", "priority") == [hour]
        ingest_hours(settings, [hour], replace=True)
        replayed(catalog, "orders", "priority")
        assert accept_rename(catalog, "orders", "region", "zone") == [hour]
        ingest_hours(settings, [hour], replace=True)
        replayed(catalog, "orders", "region")
        accounts = account_hours(settings, [hour])[hour]
        assert all(a.balanced and a.quarantine_rows == 0 for a in accounts.values()), accounts
        sides[config] = settings
    counts = assert_same_bronze(sides[STRING_JSON], sides[PRECISE_AVRO], TABLES)
    landed = Counter(r.topic.rsplit(".", 1)[1] for r in captured[PRECISE_AVRO].records if r.value is not None)
    assert counts == {t: landed[t] for t in TABLES}
