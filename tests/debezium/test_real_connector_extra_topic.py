"""A table outside the contract through the real Debezium 3.6 PostgreSQL connector (issue #36): the OLTP team creates
``returns`` while the connector streams; it sends the table's changes by default (topic ``oltp.public.returns``),
landed in the open hour with the contract's topics. `run` ingests them into ``bronze.extra_oltp_public_returns``
(docs/contract/sources.md, section 8), one row per row change, accounted for, and the ``outside_contract`` check fails
as an ERROR that the check-alert sensor posts."""

from __future__ import annotations

import base64
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from logistics_platform.cli.render import render_summary
from logistics_platform.defs.bronze.checks import CHECK_OUTSIDE_CONTRACT
from logistics_platform.defs.bronze.keys import EXTRA_KEY
from logistics_platform.defs.operate.alert_sensors import deliver_check_alerts
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.operate.alerts import read_log
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import local_settings
from tests.debezium.test_real_connector import newest_hour
from tests.debezium.workload import oltp_database, table_rows
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


@pytest.mark.parametrize("config", [PRECISE_JSON, PRECISE_AVRO], ids=lambda c: c.name)
def test_a_new_table_lands_in_bronze_with_its_rows_counted_and_an_alert(
    world: Any, config: ConverterConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured, tables = world
    landed = [r for r in captured[config].records if r.topic == TOPIC and r.value is not None]
    assert len(landed) == INSERTS + UPDATES + DELETES  # every row change of returns, as the connector sent it
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # a kept instance: its check evaluations are read below
    settings = local_settings(tmp_path / "platform", dagster_home=home)
    land(captured[config], settings.landing_dir, newest_hour(settings))  # the open hour, as a live sink does

    summary = run_pipeline(settings)

    assert summary.ok, render_summary(summary)
    assert not [p for p in summary.skipped if TOPIC in p]  # ingested, not left out
    assert summary.bronze[TABLE] == len(landed)
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        assert duck.execute("select count(*) from bronze.quarantine").fetchone() == (0,)
        rows = duck.execute(
            f"select {', '.join(COLUMNS)}, _op, _lsn, _topic from bronze.{TABLE} order by _lsn, _offset"
        ).fetchall()
        orders = duck.execute(f"select {', '.join(TABLES['orders'])} from marts.fct_orders order by 1").fetchall()
    finally:
        duck.close()
    assert len(rows) == len(landed) and {r[-1] for r in rows} == {TOPIC}
    assert [r[6] for r in rows] == ["c"] * INSERTS + ["u"] * UPDATES + ["d"] * DELETES
    # Its changes replayed (the highest lsn of each key wins, a delete removes) give the PostgreSQL table.
    state: dict[int, tuple[Any, ...]] = {}
    for r in rows:
        if r[6] == "d":
            state.pop(r[0])
        else:
            state[r[0]] = (r[0], r[1], decimal_of(r[2]), *r[3:6])
    assert [state[k] for k in sorted(state)] == tables["returns"]
    assert orders == tables["orders"]  # the contract's marts as before
    # Typed from the records' own schema: the Avro writer schema declares the decimal.
    types = {f.name: str(f.field_type) for f in load_catalog(settings).load_table(f"bronze.{TABLE}").schema().fields}
    amount = "string" if config is PRECISE_JSON else "decimal(12, 2)"
    expected = {"return_id": "long", "order_id": "long", "amount": amount, "reason": "string"}
    assert {c: types[c] for c in COLUMNS} == {**expected, "restocked": "boolean", "created_at": "timestamp"}
    # Accounted like a contract topic, in bronze.ingest_log.
    [entry] = [e for (topic, _), e in read_ingest_log(load_catalog(settings)).items() if topic == TOPIC]
    assert (entry.lines, entry.rows, entry.quarantined, entry.tombstones) == (len(landed), len(landed), 0, 0)
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
