"""A table outside the contract through the real Debezium 3.6 PostgreSQL connector (issue #36): the OLTP team creates
``returns`` while the connector streams; it sends the table's changes by default (topic ``oltp.public.returns``),
landed in the open hour with the contract's topics. `run` ingests them into ``bronze.extra_oltp_public_returns``
(docs/contract/sources.md, section 8), one row per row change, accounted for, and the ``outside_contract`` check fails
as an ERROR that the check-alert sensor posts. One engine run for both converter configs: the JSON one goes through
the pipeline, the check and the alert; the Avro one is ingested, typed from its writer schema, and gives the contract
tables the JSON's bronze rows."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from logistics_platform.cli.render import render_summary
from logistics_platform.defs.bronze.checks import CHECK_OUTSIDE_CONTRACT
from logistics_platform.defs.bronze.keys import EXTRA_KEY
from logistics_platform.defs.operate.alert_sensors import deliver_check_alerts
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.schema import QUARANTINE_TABLE
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.operate.alerts import read_log
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.pipeline import Summary, run_pipeline
from logistics_platform.settings import Settings, local_settings
from tests.debezium.workload import oltp_database, table_rows
from tests.support.bronze_equality import assert_same_bronze
from tests.support.connect_sink import land
from tests.support.debezium import ENGINE_MARKS, ConverterConfig, capture

pytestmark = ENGINE_MARKS

# Typed from the values (schemaless JSON) and from the records' own schema (Avro; a JSON schema block is read into
# the same declared types, lib/bronze/values.connect_types).
PRECISE_JSON = ConverterConfig("precise", "json", schemas_enable=False)
PRECISE_AVRO = ConverterConfig("precise", "avro")
TOPIC, TABLE = "oltp.public.returns", "extra_oltp_public_returns"
COLUMNS = ("return_id", "order_id", "amount", "reason", "restocked", "created_at")
RETURNS_DDL = (
    "create table returns (return_id bigint primary key, order_id bigint not null, amount numeric(12,2) not null,"
    " reason text, restocked boolean not null default false, created_at timestamptz not null default clock_timestamp())"
)
INSERTS, UPDATES, DELETES = 20, 5, 3


def workload(conn: Any) -> None:
    """Contract changes, then ``returns`` created and changed while the connector streams, then more changes."""
    simulate(conn, 120, seed=2)
    with conn.cursor() as cur:
        cur.execute(RETURNS_DDL)
        conn.commit()
        for i in range(1, INSERTS + 1):  # one transaction each; every fourth without a reason
            insert = "insert into returns (return_id, order_id, amount, reason) values (%s, %s, %s, %s)"
            cur.execute(insert, (i, 1000 + i, f"{i}.50", None if i % 4 == 0 else "damaged"))
            conn.commit()
        cur.execute("update returns set restocked = true, amount = amount + 1 where return_id <= %s", (UPDATES,))
        conn.commit()
        cur.execute("delete from returns where return_id > %s", (INSERTS - DELETES,))
        conn.commit()
    simulate(conn, 60, seed=4)


@pytest.fixture(scope="module")
def world() -> Any:
    with oltp_database() as db:
        captured = capture(db, (PRECISE_JSON, PRECISE_AVRO), workload)
        conn = db.connect()
        try:
            tables = {t: table_rows(conn, t, cols, KEYS[t]) for t, cols in TABLES.items()}
            tables["returns"] = table_rows(conn, "returns", COLUMNS, "return_id")
        finally:
            conn.close()
    return captured, tables


def decimal_of(value: Any) -> Decimal:
    """An amount as bronze holds it: a decimal, or (no schema block, precise mode) the connector's base64 text."""
    if isinstance(value, Decimal):
        return value
    return Decimal(int.from_bytes(base64.b64decode(value), "big", signed=True)).scaleb(-2)


def assert_returns(settings: Settings, config: ConverterConfig, landed: int, returns: list[tuple[Any, ...]]) -> None:
    """bronze.extra_oltp_public_returns holds every landed change once, replays to the PostgreSQL table, is typed
    from the records' own schema and accounted for in bronze.ingest_log."""
    catalog = load_catalog(settings)
    assert len(catalog.load_table(("bronze", QUARANTINE_TABLE)).scan().to_arrow()) == 0
    table = (
        catalog.load_table(("bronze", TABLE))
        .scan()
        .to_arrow()
        .sort_by([("_lsn", "ascending"), ("_offset", "ascending")])
    )
    rows = list(zip(*(table[c].to_pylist() for c in (*COLUMNS, "_op", "_lsn", "_topic")), strict=True))
    assert len(rows) == landed and {r[-1] for r in rows} == {TOPIC}
    assert [r[6] for r in rows] == ["c"] * INSERTS + ["u"] * UPDATES + ["d"] * DELETES
    # Its changes replayed (the highest lsn of each key wins, a delete removes) give the PostgreSQL table.
    state: dict[int, tuple[Any, ...]] = {}
    for r in rows:
        if r[6] == "d":
            state.pop(r[0])
        else:
            state[r[0]] = (r[0], r[1], decimal_of(r[2]), *r[3:6])
    assert [state[k] for k in sorted(state)] == returns
    # Typed from the records' own schema: the Avro writer schema declares the decimal.
    types = {f.name: str(f.field_type) for f in catalog.load_table(f"bronze.{TABLE}").schema().fields}
    amount = "decimal(12, 2)" if config.converter == "avro" else "string"
    expected = {"return_id": "long", "order_id": "long", "amount": amount, "reason": "string"}
    assert {c: types[c] for c in COLUMNS} == {**expected, "restocked": "boolean", "created_at": "timestamp"}
    # Accounted like a contract topic, in bronze.ingest_log.
    [entry] = [e for (topic, _), e in read_ingest_log(catalog).items() if topic == TOPIC]
    assert (entry.lines, entry.rows, entry.quarantined, entry.tombstones) == (landed, landed, 0, 0)


@pytest.fixture(scope="module")
def json_platform(
    world: Any, landing_hour: datetime, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Settings, Summary]]:
    """The JSON config's records landed and run through `logistics-platform run`'s pipeline, in a kept instance."""
    captured, _ = world
    root = tmp_path_factory.mktemp(PRECISE_JSON.name)
    home = root / "dagster_home"
    home.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))  # a kept instance: its check evaluations are read below
        settings = local_settings(root / "platform", dagster_home=home)
        land(captured[PRECISE_JSON], settings.landing_dir, landing_hour)
        yield settings, run_pipeline(settings)


def test_a_new_table_lands_in_bronze_with_its_rows_counted_and_an_alert(
    world: Any, json_platform: tuple[Settings, Summary]
) -> None:
    captured, tables = world
    settings, summary = json_platform
    landed = [r for r in captured[PRECISE_JSON].records if r.topic == TOPIC and r.value is not None]
    assert len(landed) == INSERTS + UPDATES + DELETES  # every row change of returns, as the connector sent it
    assert summary.ok, render_summary(summary)
    assert not [p for p in summary.skipped if TOPIC in p]  # ingested, not left out
    assert summary.bronze[TABLE] == len(landed)
    assert_returns(settings, PRECISE_JSON, len(landed), tables["returns"])
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        orders = duck.execute(f"select {', '.join(TABLES['orders'])} from marts.fct_orders order by 1").fetchall()
    finally:
        duck.close()
    assert orders == tables["orders"]  # the contract's marts as before
    # The check in the UI: an ERROR (a new topic), which the check-alert sensor posts.
    instance = dg.DagsterInstance.get()
    key = dg.AssetCheckKey(EXTRA_KEY, CHECK_OUTSIDE_CONTRACT)
    records = instance.event_log_storage.get_asset_check_execution_history(key, limit=10)
    evaluations = [r.event.dagster_event.event_specific_data for r in records if r.event and r.event.dagster_event]
    [evaluation] = [e for e in evaluations if isinstance(e, dg.AssetCheckEvaluation)]  # one ingest run
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.metadata["topics"].value[TOPIC]["rows"] == len(landed)
    assert deliver_check_alerts(instance, [key], None, settings)[0] == 1
    [alert] = read_log(settings.alerts_log)
    assert alert["check_name"] == CHECK_OUTSIDE_CONTRACT and TOPIC in alert["error"]
    assert f'"table": "bronze.{TABLE}"' in alert["error"]


def test_avro_lands_the_new_table_typed_by_its_writer_schema(
    world: Any, json_platform: tuple[Settings, Summary], landing_hour: datetime, tmp_path: Path
) -> None:
    captured, tables = world
    settings = local_settings(tmp_path)
    land(captured[PRECISE_AVRO], settings.landing_dir, landing_hour)
    ingest_hour(settings, landing_hour)
    landed = [r for r in captured[PRECISE_AVRO].records if r.topic == TOPIC and r.value is not None]
    assert_returns(settings, PRECISE_AVRO, len(landed), tables["returns"])
    assert_same_bronze(json_platform[0], settings, TABLES)  # the contract's tables as the JSON's
