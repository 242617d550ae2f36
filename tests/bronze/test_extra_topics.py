"""A topic outside the source contract (docs/contract/sources.md, section 8): its own bronze table typed from the
records' own schema (the Connect schema block, the Avro writer schema, else the values), the envelope's metadata
columns, every line accounted for in bronze.ingest_log and `verify`, and a check (an alert when the topic is new)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyiceberg.types import BooleanType, DecimalType, LongType, StringType, TimestampType

from logistics_platform.cli import main
from logistics_platform.cli.render import render_summary
from logistics_platform.defs.bronze.assets import build_bronze_assets
from logistics_platform.defs.bronze.checks import CHECK_OUTSIDE_CONTRACT
from logistics_platform.defs.bronze.keys import EXTRA_KEY
from logistics_platform.defs.operate.alert_sensors import deliver_check_alerts
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import hour_dir, topic_specs
from logistics_platform.lib.bronze.unread import unread_files
from logistics_platform.lib.bronze.views import refresh_bronze_views
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.operate.alerts import read_log
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.pipeline import Summary
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, local_settings
from tests.support.avro_encode import avro_record, envelope_schema
from tests.support.bronze import HOUR, account_hour, cdc, contract_hour, dump, iso, write_file
from tests.support.connect_sink import avro_container, sync_marker

RETURNS = "oltp.public.returns"
TABLE = "extra_oltp_public_returns"
T = HOUR + timedelta(minutes=5)
# The returns table as its OLTP DDL would declare it: how the writer schemas below describe it.
COLUMNS = (
    bs.Column("return_id", LongType(), "key"),
    bs.Column("order_id", LongType(), ""),
    bs.Column("amount", DecimalType(12, 2), ""),
    bs.Column("reason", StringType(), ""),
    bs.Column("created_at", TimestampType(), ""),
    bs.Column("restocked", BooleanType(), ""),
)
SPEC = bs.TopicSpec("returns", RETURNS, "return_id", COLUMNS)


def row(return_id: int, amount: str = "12.50", reason: str | None = "damaged", **over: Any) -> dict[str, Any]:
    return {
        "return_id": return_id,
        "order_id": 7,
        "amount": amount,
        "reason": reason,
        "created_at": iso(T),
        "restocked": False,
        **over,
    }


def changes() -> list[dict[str, Any]]:
    """Inserts (one with a null reason), an update, a delete whose ``before`` holds the key and placeholders."""
    return [
        cdc("c", "returns", row(1, reason=None), lsn=100, ts=T),
        cdc("c", "returns", row(2, "0.01"), lsn=110, ts=T),
        cdc("u", "returns", row(1, "13.00", restocked=True), lsn=120, ts=T),
        cdc("d", "returns", None, before=row(2, "0.00", reason="", created_at="1970-01-01T00:00:00Z"), lsn=130, ts=T),
    ]


def connect_decimal(text: str) -> str:
    """A decimal as a Kafka Connect ``Decimal`` of scale 2 (Debezium's precise mode): base64 of the unscaled value."""
    unscaled = int(Decimal(text).scaleb(2))
    return base64.b64encode(unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)).decode()


def with_schema(envelope: dict[str, Any]) -> dict[str, Any]:
    """The JsonConverter's ``schemas.enable=true`` line of an envelope (precise decimals, as the connector's)."""
    fields = [
        {"field": "return_id", "type": "int64", "optional": False},
        {"field": "order_id", "type": "int64", "optional": False},
        {
            "field": "amount",
            "type": "bytes",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "2", "connect.decimal.precision": "12"},
        },
        {"field": "reason", "type": "string", "optional": True},
        {"field": "created_at", "type": "string", "optional": False, "name": "io.debezium.time.ZonedTimestamp"},
        {"field": "restocked", "type": "boolean", "optional": False},
    ]
    value = {"type": "struct", "fields": fields, "optional": True, "name": f"{RETURNS}.Value"}
    schema = {
        "type": "struct",
        "name": f"{RETURNS}.Envelope",
        "fields": [{**value, "field": "before"}, {**value, "field": "after"}, {"field": "op", "type": "string"}],
    }
    payload = dict(envelope)
    for image in ("before", "after"):
        if payload[image] is not None:
            payload[image] = {**payload[image], "amount": connect_decimal(payload[image]["amount"])}
    return {"schema": schema, "payload": payload}


def write_avro(landing: Path, envelopes: list[dict[str, Any]]) -> None:
    """An Avro container of the envelopes under the connector's writer schema, as a sink's AvroFormat writes it."""
    schema = envelope_schema(SPEC)
    folder = landing / hour_dir(RETURNS, HOUR)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{RETURNS}+0+0000000000.avro"
    path.write_bytes(avro_container(schema, [avro_record(schema, e) for e in envelopes], sync_marker(path.name)))


def bronze(settings: Settings, columns: str = "*", table: str = TABLE) -> list[tuple[Any, ...]]:
    duck = connect(settings=settings)
    try:
        refresh_bronze_views(duck, settings)  # the views dbt reads (and a user's DuckDB session): extras included
        return duck.execute(f"select {columns} from bronze.{table} order by _offset").fetchall()
    finally:
        duck.close()


def types(settings: Settings) -> dict[str, str]:
    return {f.name: str(f.field_type) for f in load_catalog(settings).load_table(f"bronze.{TABLE}").schema().fields}


def expected_rows(amounts: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """(return_id, amount, reason, restocked, _op, _lsn) of ``changes()`` in landing order."""
    ops = [(1, None, "c", 100), (2, "damaged", "c", 110), (1, "damaged", "u", 120), (2, "", "d", 130)]
    restocked = [False, False, True, False]
    return [(k, a, r, s, op, lsn) for (k, r, op, lsn), a, s in zip(ops, amounts, restocked, strict=True)]


COLUMNS_READ = "return_id, amount, reason, restocked, _op, _lsn"


def test_json_without_a_schema_is_typed_from_its_values_and_every_line_is_accounted_for(
    tmp_path: Path, cli_env: Callable[[Settings], None], capsys: pytest.CaptureFixture[str]
) -> None:
    s = local_settings(tmp_path)
    lines = [dump(e) for e in changes()]
    lines += [b"null", dump(changes()[1]), b"not json", dump({**changes()[0], "op": None})]  # tombstone, copy, 2 bad
    write_file(s.landing_dir, RETURNS, HOUR, 0, 0, lines)
    assert unread_files(s.landing_dir) == {} and TABLE in topic_specs(s.landing_dir)

    report = ingest_hour(s, HOUR)

    tr = report.topics[TABLE]
    assert (tr.lines, tr.rows, tr.quarantined, tr.tombstones) == (8, 5, 2, 1)
    assert tr.quarantined_by_reason == {"invalid_op": 1, "malformed_json": 1}
    assert types(s) == {
        **{c.name: str(c.type) for c in bs.metadata_columns(bs.spec_of(RETURNS))},
        "return_id": "long",
        "order_id": "long",
        "amount": "string",  # a decimal string: text, as the connector sent it
        "created_at": "timestamp",  # ISO-8601 UTC text
        "restocked": "boolean",
        "reason": "string",  # null at first, typed when a value came
    }
    got = bronze(s, COLUMNS_READ)
    assert got[:4] == expected_rows(("12.50", "0.01", "13.00", "0.00"))
    assert got[4] == got[1]  # the redelivered copy, kept as bronze keeps every copy
    ids = bronze(s, "_event_id, _topic")
    assert ids[4] == ids[1] and len({i for i, _ in ids}) == 4 and {t for _, t in ids} == {RETURNS}
    # The same ingest-log row and accounting as a contract topic's.
    [entry] = [e for (topic, _), e in read_ingest_log(load_catalog(s)).items() if topic == RETURNS]
    assert (entry.lines, entry.rows, entry.quarantined, entry.tombstones) == (8, 5, 2, 1) and entry.balanced
    account = account_hour(s, HOUR)[TABLE]
    assert account.balanced and (account.lines, account.bronze_rows, account.quarantine_rows) == (8, 5, 2)
    cli_env(s)
    assert main(["verify", "--all"]) == 0
    out = capsys.readouterr().out
    assert f"{RETURNS:<28} lines        8 = rows        5 + quarantined      2 + tombstones      1  ok" in out
    assert "files not read" not in out
    # Ingested again: unchanged, nothing doubled; a late file appends.
    assert ingest_hour(s, HOUR).mode == "unchanged"
    write_file(s.landing_dir, RETURNS, HOUR, 0, 8, [dump(cdc("c", "returns", row(3), lsn=140, ts=T))])
    again = ingest_hour(s, HOUR)
    assert again.mode == "append" and again.topics[TABLE].rows == 6 and len(bronze(s)) == 6
    assert account_hour(s, HOUR)[TABLE].balanced


def test_a_connect_schema_types_the_table_null_columns_too(tmp_path: Path) -> None:
    s = local_settings(tmp_path)
    write_file(s.landing_dir, RETURNS, HOUR, 0, 0, [dump(with_schema(e)) for e in changes()])

    report = ingest_hour(s, HOUR)

    assert report.topics[TABLE].rows == 4 and report.quarantined == 0
    # reason is null in the first line: the schema block's type added it with the others.
    assert list(report.topics[TABLE].added_columns) == [c.name for c in COLUMNS]
    assert {k: v for k, v in types(s).items() if not k.startswith("_")} == {
        "return_id": "long",
        "order_id": "long",
        "amount": "decimal(12, 2)",
        "reason": "string",
        "created_at": "timestamp",
        "restocked": "boolean",
    }
    assert bronze(s, COLUMNS_READ) == expected_rows(tuple(Decimal(a) for a in ("12.50", "0.01", "13.00", "0.00")))
    assert bronze(s, "created_at")[0] == (T.replace(microsecond=0),)


def test_avro_is_typed_from_its_writer_schema_and_gives_the_rows_of_the_json(tmp_path: Path) -> None:
    json_side, avro_side = local_settings(tmp_path / "json"), local_settings(tmp_path / "avro")
    write_file(json_side.landing_dir, RETURNS, HOUR, 0, 0, [dump(with_schema(e)) for e in changes()])
    write_avro(avro_side.landing_dir, changes())

    report = ingest_hour(avro_side, HOUR)
    ingest_hour(json_side, HOUR)

    assert (report.topics[TABLE].lines, report.topics[TABLE].rows, report.quarantined) == (4, 4, 0)
    assert types(avro_side) == types(json_side)
    same = "return_id, order_id, amount, reason, created_at, restocked, _op, _lsn, _event_time, _tx_id"
    assert bronze(avro_side, same) == bronze(json_side, same)
    assert account_hour(avro_side, HOUR)[TABLE].balanced


def test_the_check_fails_as_an_error_when_the_topic_is_new_and_the_alert_names_it(tmp_path: Path) -> None:
    s = local_settings(tmp_path)
    contract_hour(s.landing_dir)
    write_file(s.landing_dir, RETURNS, HOUR, 0, 0, [dump(e) for e in changes()])
    instance = dg.DagsterInstance.ephemeral()
    assets = build_bronze_assets(s)

    def materialize() -> dict[str, dg.AssetCheckEvaluation]:
        result = dg.materialize([assets], partition_key=hour_key(HOUR), resources=build_resources(s), instance=instance)
        assert result.success
        mats = {m.asset_key: m.materialization.metadata for m in result.get_asset_materialization_events()}
        assert mats[EXTRA_KEY]["rows_by_table"].value == {f"bronze.{TABLE}": 4}
        return {c.check_name: c for c in result.get_asset_check_evaluations() if c.asset_key == EXTRA_KEY}

    check = materialize()[CHECK_OUTSIDE_CONTRACT]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
    said = check.description or ""
    assert f'"{RETURNS}": {{"table": "bronze.{TABLE}", "lines": 4, "rows": 4, "quarantined": 0, "tombstones": 0' in said
    found = check.metadata["topics"].value[RETURNS]
    assert found["new_columns"] == sorted(row(1)) and found["balanced"] and found["table"] == f"bronze.{TABLE}"
    sent, cursor = deliver_check_alerts(instance, [dg.AssetCheckKey(EXTRA_KEY, CHECK_OUTSIDE_CONTRACT)], None, s)
    [alert] = read_log(s.alerts_log)
    assert sent == 1 and alert["check_name"] == CHECK_OUTSIDE_CONTRACT and RETURNS in alert["error"]
    # Known since: a warning in the UI, no new alert.
    again = materialize()[CHECK_OUTSIDE_CONTRACT]
    assert not again.passed and again.severity == dg.AssetCheckSeverity.WARN
    assert deliver_check_alerts(instance, [dg.AssetCheckKey(EXTRA_KEY, CHECK_OUTSIDE_CONTRACT)], cursor, s)[0] == 0
    # `run`'s summary counts the table's rows with the others'.
    rendered = render_summary(Summary(partitions=[hour_key(HOUR)], bronze={"orders": 7, TABLE: 4}))
    assert f"bronze.{TABLE}" in rendered


def test_an_hour_without_extra_topics_passes_the_check(tmp_path: Path) -> None:
    s = local_settings(tmp_path)
    contract_hour(s.landing_dir)
    result = dg.materialize([build_bronze_assets(s)], partition_key=hour_key(HOUR), resources=build_resources(s))
    checks = {c.check_name: c for c in result.get_asset_check_evaluations() if c.asset_key == EXTRA_KEY}
    assert checks[CHECK_OUTSIDE_CONTRACT].passed and set(checks) == {CHECK_OUTSIDE_CONTRACT}
    assert not any(n.startswith("extra_") for _, n in load_catalog(s).list_tables("bronze"))


def test_two_topics_that_would_share_a_table_name_the_second_is_reported_not_read(tmp_path: Path) -> None:
    s = local_settings(tmp_path)
    for topic in ("oltp.public.a-b", "oltp.public.a_b"):
        write_file(s.landing_dir, topic, HOUR, 0, 0, [dump(cdc("c", "a_b", {"id": 1}, lsn=1, ts=T))])
    assert topic_specs(s.landing_dir)["extra_oltp_public_a_b"].topic == "oltp.public.a-b"
    [(path, why)] = unread_files(s.landing_dir).items()
    assert path.startswith("topics/oltp.public.a_b/") and "bronze.extra_oltp_public_a_b is another topic's" in why
    report = ingest_hour(s, HOUR)
    assert report.topics["extra_oltp_public_a_b"].rows == 1 and bronze(s, "id", "extra_oltp_public_a_b") == [(1,)]


def test_a_truncate_and_a_first_line_without_columns(tmp_path: Path) -> None:
    """A truncate (no row image) is a row with only its metadata, as in the contract's tables."""
    s = local_settings(tmp_path)
    lines = [dump(cdc("t", "returns", None, lsn=90, ts=T)), dump(cdc("c", "returns", row(1), lsn=100, ts=T))]
    write_file(s.landing_dir, RETURNS, HOUR, 0, 0, lines)
    assert ingest_hour(s, HOUR).topics[TABLE].rows == 2
    assert bronze(s, "_op, return_id") == [("t", None), ("c", 1)]


def test_worker_processes_parse_a_topic_outside_the_contract_as_this_process_does(tmp_path: Path) -> None:
    """Parse workers rebuild the topic's spec from the block task (its topic travels with it)."""
    serial, parallel = local_settings(tmp_path / "serial"), local_settings(tmp_path / "parallel", ingest_workers=2)
    for s in (serial, parallel):
        write_file(s.landing_dir, RETURNS, HOUR, 0, 0, [dump(with_schema(e)) for e in changes()])
        write_file(s.landing_dir, RETURNS, HOUR, 1, 0, [dump(e) for e in changes()])
    ingest_hour(serial, HOUR)
    report = ingest_hour(parallel, HOUR, parallel_min_bytes=0)
    assert report.topics[TABLE].rows == 8 and report.quarantined == 0
    assert bronze(parallel, COLUMNS_READ) == bronze(serial, COLUMNS_READ) and types(parallel) == types(serial)
