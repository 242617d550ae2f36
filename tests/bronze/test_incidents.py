"""Schema incidents (#36): which rejected values are a type change the column cannot take, the check's words, and the
way out (the column accepted as text, the hours it touched re-ingested) on real Iceberg tables."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pyiceberg.types import BooleanType, DecimalType, DoubleType, LongType, StringType, TimestampType

from logistics_platform.defs.bronze.checks import CHECK_SCHEMA_INCIDENT, bronze_check_results
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.accounting import account_hours, account_ingest
from logistics_platform.lib.bronze.envelope import LineParser, Rejected
from logistics_platform.lib.bronze.incidents import (
    ACCEPTED,
    RENAMED,
    REPLAY,
    accept_as_text,
    accept_rename,
    carry_accepted,
    declared_type,
    describe,
    note_incident,
    replayed,
    type_change,
)
from logistics_platform.lib.bronze.ingest import ingest_hours
from logistics_platform.lib.bronze.reports import IngestReport
from logistics_platform.lib.bronze.tables import ensure_bronze_tables
from logistics_platform.lib.bronze.values import CONNECT_DECIMAL
from logistics_platform.lib.connections import load_catalog
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import HOUR, cdc, dump, order, write_file

ORDERS = "oltp.public.orders"


def decimal_field(scale: int, precision: int = 12) -> dict[str, Any]:
    params = {"scale": str(scale), "connect.decimal.precision": str(precision)}
    return {"field": "total_amount", "type": "bytes", "name": CONNECT_DECIMAL, "parameters": params}


@pytest.mark.parametrize(
    ("column", "value", "declared", "evolved", "change"),
    [
        # A column added by schema evolution is typed by its first value: another JSON type is a new type.
        (LongType(), "high", None, True, "long -> string"),
        (LongType(), 2.5, None, True, "long -> double"),
        (BooleanType(), 1, None, True, "boolean -> long"),
        (LongType(), 2**70, None, True, None),  # a long that does not fit: a bad value
        (DoubleType(), "x", None, True, "double -> string"),
        # A contract column without a declared type: one wrong value and a changed type look the same.
        (LongType(), "7", None, False, None),
        (DecimalType(12, 2), "1.234", None, False, None),
        # The line declares its types (a JsonConverter schema block, an Avro writer schema).
        (LongType(), "7", {"type": "string"}, False, "long -> string"),
        (StringType(), 5, {"type": "int32"}, False, "string -> int"),
        (DecimalType(12, 2), "AQ==", decimal_field(3), False, "decimal(12, 2) -> decimal(12, 3)"),
        (DecimalType(12, 2), "AQ==", decimal_field(0, 10), False, "decimal(12, 2) -> decimal(10, 0)"),
        (DecimalType(12, 2), "AQ==", decimal_field(2, 14), False, None),  # precision up: a promotion, not ours
        (DecimalType(12, 2), "abc", {"type": "string"}, False, None),  # decimal.handling.mode=string
        (DecimalType(12, 2), 1e300, {"type": "double"}, False, None),  # decimal.handling.mode=double
        (TimestampType(), "soon", {"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, False, None),
        (TimestampType(), True, {"type": "boolean"}, False, "timestamp -> boolean"),
        (DoubleType(), 2**70, {"type": "int64"}, False, None),
    ],
)
def test_a_rejected_value_is_a_type_change_only_when_its_type_is_not_one_the_column_reads(
    column: Any, value: Any, declared: Any, evolved: bool, change: str | None
) -> None:
    block = None if declared is None else {"fields": [{"field": "after", "fields": [{**declared, "field": "c"}]}]}
    assert type_change(column, value, declared_type(block, "c"), evolved) == change


def test_the_declared_type_is_read_from_a_cdc_or_a_plain_schema_block() -> None:
    plain = {"type": "struct", "fields": [{"field": "lat", "type": "float64"}, {"field": "n", "type": "struct"}]}
    assert declared_type(plain, "lat") == "double"
    assert declared_type(plain, "n") is None and declared_type(plain, "other") is None
    assert declared_type({"fields": [{"field": "after", "fields": [decimal_field(3)]}]}, "total_amount") == (
        "decimal(12, 3)"
    )
    assert declared_type(None, "lat") is None and declared_type({"fields": "x"}, "lat") is None


def parser(evolved: dict[str, Any] | None = None, renames: dict[str, str] | None = None) -> LineParser:
    return LineParser(bs.TOPICS["orders"], HOUR, 7200, evolved, renames=renames)


def check_results(settings: Settings, reports: list[IngestReport]) -> dict[tuple[str, str], Any]:
    """The bronze checks of an ingest, by (table, check name)."""
    results = bronze_check_results(reports, account_ingest(settings, reports))
    return {(r.asset_key.path[-1], r.check_name): r for r in results}


def orders_by_lsn(catalog: Any, column: str) -> list[dict[str, Any]]:
    """bronze.orders' key, ``_lsn`` and ``column`` of every row, in ``_lsn`` order."""
    rows = catalog.load_table("bronze.orders").scan(selected_fields=("order_id", "_lsn", column)).to_arrow()
    return sorted(rows.to_pylist(), key=lambda r: r["_lsn"])


def renamed(order_id: int, ts: Any, zone: Any = "south") -> dict[str, Any]:
    """An order row image after the source renamed ``region`` to ``zone``."""
    row = order(order_id, ts)
    del row["region"]
    return {**row, "zone": zone}


def test_the_line_parser_quarantines_a_type_change_as_incompatible_type_with_the_change_in_its_detail() -> None:
    line = dump(cdc("u", "orders", order(1, HOUR, priority="high"), lsn=10, ts=HOUR))
    res = parser({"priority": LongType()}).parse(line, 0, 5, "f.json")
    assert isinstance(res, Rejected) and res.reason == "incompatible_type:priority", res
    assert res.detail.startswith("priority: long -> string; ") and "'high'" in res.detail
    # a contract column with a declared type: the schema block says courier_id is text now
    wrapped = {"schema": {"fields": [{"field": "after", "fields": [{"field": "courier_id", "type": "string"}]}]}}
    wrapped["payload"] = cdc("u", "orders", order(1, HOUR, courier_id="c-7"), lsn=10, ts=HOUR)
    res = parser().parse(dump(wrapped), 0, 5, "f.json")
    assert isinstance(res, Rejected) and res.reason == "incompatible_type:courier_id", res
    # without a declared type, the same value in the contract column stays a bad value
    res = parser().parse(dump(wrapped["payload"]), 0, 5, "f.json")
    assert isinstance(res, Rejected) and res.reason == "invalid_value:courier_id", res


def test_a_contract_column_renamed_at_the_source_is_an_incident_until_the_rename_is_accepted() -> None:
    line = dump(cdc("u", "orders", renamed(1, HOUR), lsn=10, ts=HOUR))
    res = parser().parse(line, 0, 5, "f.json")
    assert isinstance(res, Rejected) and res.reason == "incompatible_type:region", res
    assert res.detail == "region: string -> renamed to zone; the row has no region but a new column zone"
    # a null in the new column loses nothing: the row is the one the old name would give (as the clean path reads it)
    res = parser().parse(dump(cdc("u", "orders", renamed(1, HOUR, zone=None), lsn=10, ts=HOUR)), 0, 5, "f.json")
    assert isinstance(res, list) and res[3] is None and res[-1] is None
    # an added column beside every contract column is schema evolution, not a rename
    res = parser().parse(dump(cdc("u", "orders", order(1, HOUR, zone="x"), lsn=10, ts=HOUR)), 0, 5, "f.json")
    assert isinstance(res, list) and res[-1] == {"zone": "x"}
    accepted = parser(renames={"zone": "region"})
    res = accepted.parse(line, 0, 5, "f.json")
    assert isinstance(res, list) and accepted.row_dict(res)["region"] == "south" and res[-1] is None, res
    wrapped = {"schema": {"fields": [{"field": "after", "fields": [{"field": "zone", "type": "string"}]}]}}
    res = accepted.parse(dump({**wrapped, "payload": cdc("c", "orders", renamed(2, HOUR), lsn=11, ts=HOUR)}), 0, 6, "f")
    assert isinstance(res, list) and accepted.row_dict(res)["region"] == "south", res


def test_the_lines_and_first_position_of_each_column_are_kept_and_described() -> None:
    incidents: dict[str, dict[str, Any]] = {}
    b = "topics/oltp.public.orders/dt=2026-11-02/hr=10/oltp.public.orders+0+0000000400.json"
    a = "topics/oltp.public.orders/dt=2026-11-02/hr=10/oltp.public.orders+0+0000000100.json"
    row = (ORDERS, 0, 412, b, 0, "incompatible_type:priority", "priority: long -> string; x", "{}", "utf-8")
    note_incident(incidents, row)
    note_incident(incidents, (*row[:2], 105, a, *row[4:]))
    note_incident(incidents, (*row[:2], 420, b, *row[4:]))
    note_incident(incidents, (*row[:5], "invalid_value:status", "status: x", *row[7:]))
    first = {"old_type": "long", "new_type": "string", "file": a, "line": 6, "offset": 105}
    assert incidents == {"priority": {"lines": 3, **first}}
    words = describe("orders", "priority", incidents["priority"])
    for needle in (
        "bronze.orders.priority",
        "long -> string",
        "100.json line 6",
        "3 lines",
        "run --accept-type orders.priority",
    ):
        assert needle in words, words


def test_accept_as_text_then_replay_brings_every_line_into_bronze_exactly_once(tmp_path: Any) -> None:
    """Hour 1 holds old (integer) values, hour 2 the type change, hour 3 neither: hours 1 and 2 are replayed."""
    settings = local_settings(tmp_path)
    h1, h2, h3 = HOUR, HOUR + timedelta(hours=1), HOUR + timedelta(hours=2)
    write_file(
        settings.landing_dir, ORDERS, h1, 0, 0, [dump(cdc("c", "orders", order(1, h1, priority=2), lsn=10, ts=h1))]
    )
    changed = [
        cdc("u", "orders", order(1, h2, priority=3), lsn=20, ts=h2),
        cdc("u", "orders", order(1, h2, priority="high"), lsn=30, ts=h2),
        cdc("c", "orders", order(2, h2, priority="low"), lsn=40, ts=h2),
    ]
    write_file(settings.landing_dir, ORDERS, h2, 0, 1, [dump(e) for e in changed])
    write_file(settings.landing_dir, ORDERS, h3, 0, 4, [dump(cdc("c", "orders", order(3, h3), lsn=50, ts=h3))])
    reports = ingest_hours(settings, [h1, h2, h3])
    assert reports[1].topics["orders"].quarantined_by_reason == {"incompatible_type:priority": 2}
    results = check_results(settings, reports)
    check = results["orders", CHECK_SCHEMA_INCIDENT]
    assert not check.passed and check.severity.value == "ERROR"
    assert check.description is not None and "long -> string" in check.description
    assert f"{ORDERS}+0+0000000001.json line 2 (offset 2)" in check.description, check.description
    assert results["payments", CHECK_SCHEMA_INCIDENT].passed

    catalog = load_catalog(settings)
    with pytest.raises(ValueError, match="contract column"):
        accept_as_text(catalog, "orders", "total_amount")
    hours = accept_as_text(catalog, "orders", "priority")
    assert hours == [h1, h2]
    table = catalog.load_table("bronze.orders")
    assert isinstance(table.schema().find_field("priority").field_type, StringType)
    assert table.properties[ACCEPTED + "priority"] == "string"
    assert table.properties[REPLAY + "priority"] == f"{h1.isoformat()},{h2.isoformat()}"
    assert accept_as_text(catalog, "orders", "priority") == hours  # an unfinished replay: the same hours again

    replay = ingest_hours(settings, hours, replace=True)
    replayed(catalog, "orders", "priority")
    assert REPLAY + "priority" not in catalog.load_table("bronze.orders").properties
    results = check_results(settings, replay)
    assert results["orders", CHECK_SCHEMA_INCIDENT].passed
    assert orders_by_lsn(catalog, "priority") == [
        {"order_id": 1, "_lsn": 10, "priority": "2"},
        {"order_id": 1, "_lsn": 20, "priority": "3"},
        {"order_id": 1, "_lsn": 30, "priority": "high"},
        {"order_id": 2, "_lsn": 40, "priority": "low"},
        {"order_id": 3, "_lsn": 50, "priority": None},
    ]
    assert catalog.load_table("bronze.quarantine").scan().to_arrow().num_rows == 0
    accounts = account_hours(settings, [h1, h2, h3], catalog)
    assert all(a.balanced for hour in accounts.values() for a in hour.values())
    assert [accounts[h]["orders"].bronze_rows for h in (h1, h2, h3)] == [1, 3, 1]
    with pytest.raises(ValueError, match="no column 'priority' of another type than text"):
        accept_as_text(catalog, "orders", "priority")


def test_accept_rename_then_replay_reads_the_new_name_as_the_contract_column_exactly_once(tmp_path: Any) -> None:
    """Hour 1 holds the old name, hour 2 the rename (quarantined, then replayed), hour 3 lands after the acceptance."""
    settings = local_settings(tmp_path)
    h1, h2, h3 = HOUR, HOUR + timedelta(hours=1), HOUR + timedelta(hours=2)
    write_file(settings.landing_dir, ORDERS, h1, 0, 0, [dump(cdc("c", "orders", order(1, h1), lsn=10, ts=h1))])
    changed = [
        cdc("u", "orders", renamed(1, h2, "east"), lsn=20, ts=h2),
        cdc("c", "orders", renamed(2, h2), lsn=30, ts=h2),
        cdc("c", "orders", renamed(3, h2, "north-east"), lsn=35, ts=h2, wrapped=True),  # JSON with schemas
        cdc("c", "orders", renamed(4, h2, None), lsn=36, ts=h2),  # a null in the new name: no value lost
    ]
    write_file(settings.landing_dir, ORDERS, h2, 0, 1, [dump(e) for e in changed])
    reports = ingest_hours(settings, [h1, h2])
    assert reports[1].topics["orders"].quarantined_by_reason == {"incompatible_type:region": 3}
    results = check_results(settings, reports)
    check = results["orders", CHECK_SCHEMA_INCIDENT]
    assert not check.passed and check.description is not None
    assert "run --accept-rename orders.region=zone" in check.description, check.description

    catalog = load_catalog(settings)
    for column, new, error in (
        ("order_id", "id", "the key cannot be renamed"),
        ("priority", "zone", "not a contract column"),
        ("region", "status", "already a column of bronze.orders"),
        ("status", "state", "no line of bronze.orders is quarantined as incompatible_type:status"),
    ):
        with pytest.raises(ValueError, match=error):
            accept_rename(catalog, "orders", column, new)
    assert accept_rename(catalog, "orders", "region", "zone") == [h2]
    props = catalog.load_table("bronze.orders").properties
    assert props[RENAMED + "zone"] == "region" and props[REPLAY + "region"] == h2.isoformat()
    replay = ingest_hours(settings, [h2], replace=True)
    replayed(catalog, "orders", "region")
    assert replay[0].topics["orders"].quarantined == 0
    write_file(
        settings.landing_dir, ORDERS, h3, 0, 5, [dump(cdc("u", "orders", renamed(2, h3, "west"), lsn=40, ts=h3))]
    )
    assert ingest_hours(settings, [h3])[0].topics["orders"].quarantined == 0
    assert "zone" not in catalog.load_table("bronze.orders").schema().column_names
    assert orders_by_lsn(catalog, "region") == [
        {"order_id": 1, "_lsn": 10, "region": "north"},
        {"order_id": 1, "_lsn": 20, "region": "east"},
        {"order_id": 2, "_lsn": 30, "region": "south"},
        {"order_id": 3, "_lsn": 35, "region": "north-east"},
        {"order_id": 4, "_lsn": 36, "region": None},
        {"order_id": 2, "_lsn": 40, "region": "west"},
    ]
    assert catalog.load_table("bronze.quarantine").scan().to_arrow().num_rows == 0
    accounts = account_hours(settings, [h1, h2, h3], catalog)
    assert all(a.balanced for hour in accounts.values() for a in hour.values())


def test_a_rebuild_carries_the_accepted_types_and_its_ingest_adds_the_column_as_text(tmp_path: Any) -> None:
    """The decision outlives the live tables: the staged ones get it, and a fresh orders table then adds priority as
    text from its first (integer) value, so the later text values are rows, not an incident."""
    live = local_settings(tmp_path / "live")
    ensure_bronze_tables(load_catalog(live))
    with load_catalog(live).load_table("bronze.orders").transaction() as tx:
        tx.set_properties({ACCEPTED + "priority": "string", RENAMED + "zone": "region"})
    staged = local_settings(tmp_path / "staged", landing_dir=live.landing_dir)
    carry_accepted(load_catalog(live), load_catalog(staged))
    carried = load_catalog(staged).load_table("bronze.orders").properties
    assert carried[ACCEPTED + "priority"] == "string" and carried[RENAMED + "zone"] == "region"
    assert ACCEPTED + "priority" not in load_catalog(staged).load_table("bronze.payments").properties
    events = [order(1, HOUR, priority=2), order(1, HOUR, priority="high")]
    lines = [dump(cdc("u", "orders", e, lsn=10 * (i + 1), ts=HOUR)) for i, e in enumerate(events)]
    write_file(live.landing_dir, ORDERS, HOUR, 0, 0, lines)
    (report,) = ingest_hours(staged, [HOUR])
    assert report.topics["orders"].quarantined == 0 and report.topics["orders"].added_columns == {"priority": "string"}
    rows = load_catalog(staged).load_table("bronze.orders").scan(selected_fields=("priority",)).to_arrow()
    assert sorted(rows.column(0).to_pylist()) == ["2", "high"]
