"""Every branch of the line parser: reasons, tombstones, envelope forms, encodings, identity, lateness."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from pyiceberg.types import BooleanType, DoubleType, LongType, StringType, TimestampType

from logistics_platform.lib.bronze.envelope import TOMBSTONE, LineParser, Rejected, raw_line_text
from logistics_platform.lib.bronze.schema import TOPICS
from logistics_platform.lib.bronze.values import event_id, infer_iceberg_type, parse_timestamp_micros
from logistics_platform.lib.timekeys import epoch_micros
from tests.support.bronze import cdc, dump, iso, ms, order, ping

H = datetime(2026, 11, 2, 10)
T = H + timedelta(minutes=3)
L = 2 * 3600


def orders(evolved: dict | None = None) -> LineParser:
    return LineParser(TOPICS["orders"], H, L, evolved)


def pings() -> LineParser:
    return LineParser(TOPICS["tracking_pings"], H, L)


def parse(p: LineParser, line: bytes):
    return p.parse(line, 3, 42, "topics/x/f.json")


def reason(p: LineParser, line: bytes) -> str:
    res = parse(p, line)
    assert isinstance(res, Rejected), res
    assert res.detail  # a person can tell what was wrong
    return res.reason


def test_valid_insert_is_typed_with_metadata():
    p = orders()
    row = p.row_dict(parse(p, dump(cdc("c", "orders", order(5, T), lsn=77, ts=T))))
    assert row["order_id"] == 5 and row["total_amount"] == Decimal("129.90")
    assert row["created_at"] == ms(T) * 1000
    assert row["_op"] == "c" and row["_lsn"] == 77 and row["_tx_id"] == 7
    assert row["_event_time"] == ms(T) * 1000 and row["_connector_ts"] == (ms(T) + 50) * 1000
    assert (row["_topic"], row["_kafka_partition"], row["_offset"]) == ("oltp.public.orders", 3, 42)
    assert row["_source_file"] == "topics/x/f.json"
    assert row["_arrival_hour"] == ms(H) * 1000
    assert row["_is_late"] is False and row["_lateness_seconds"] == 0
    assert row["_event_id"] == event_id("oltp.public.orders", 5, 77, "c")


def test_both_envelope_forms_give_the_same_row():
    p = orders()
    bare = parse(p, dump(cdc("u", "orders", order(5, T), lsn=77, ts=T)))
    wrapped = parse(p, dump(cdc("u", "orders", order(5, T), lsn=77, ts=T, wrapped=True)))
    assert bare == wrapped
    pp = pings()
    assert parse(pp, dump(ping("a", T))) == parse(pp, dump({"schema": {"type": "struct"}, "payload": ping("a", T)}))


@pytest.mark.parametrize(
    "line",
    [
        b"null",
        b"  null ",
        dump({"schema": None, "payload": None}),
        dump({"schema": {"type": "struct"}, "payload": None}),
    ],
)
def test_tombstones(line):
    assert parse(orders(), line) is TOMBSTONE


@pytest.mark.parametrize(
    "line",
    [
        b'{"op":"c","after":{"order_id":3',
        b"not json",
        b"",
        b'{"op":"c"} trailing',
        b'{"a":NaN}',
        b'{"op":"c","after":{"region":"\xff"}}',
        b"\xc3\x28",
    ],
)
def test_malformed_json(line):
    assert reason(orders(), line) == "malformed_json"


def test_surrogate_escapes():
    p = orders()
    pair = b'{"op":"c","after":{"order_id":1,"region":"\\ud83d\\ude00"},"source":{"lsn":1,"ts_ms":1}}'
    assert p.row_dict(parse(p, pair))["region"] == "\U0001f600"
    lone = b'{"op":"c","after":{"order_id":1,"region":"\\ud800"},"source":{"lsn":1,"ts_ms":1}}'
    assert reason(p, lone) == "malformed_json"


def test_not_utf8_is_kept_as_base64():
    text, enc = raw_line_text(b"ab\xff")
    assert enc == "base64" and text == "YWL/"
    assert raw_line_text("é".encode()) == ("é", "utf-8")


@pytest.mark.parametrize("op", [None, "x", "C", 1, "delete"])
def test_invalid_op(op):
    env = cdc("c", "orders", order(1, T), lsn=1, ts=T)
    if op is None:
        del env["op"]
    else:
        env["op"] = op
    assert reason(orders(), dump(env)) == "invalid_op"


@pytest.mark.parametrize("table", ["tenants", "couriers", "orders", "payments"])
def test_truncate_is_a_row_without_key_or_values(table):
    # Debezium's op "t" (skipped.operations=none): before and after null, the table's position in source.
    p = LineParser(TOPICS[table], H, L, {"tip_amount": StringType()})
    row = p.row_dict(parse(p, dump(cdc("t", table, None, lsn=900, ts=T))))
    assert row["_op"] == "t" and row["_lsn"] == 900 and row["_event_time"] == ms(T) * 1000
    assert {name for name in p.column_names if not name.startswith("_") and row[name] is not None} == set()
    topic = TOPICS[table].topic
    assert row["_event_id"] == event_id(topic, None, 900, "t")
    again = p.row_dict(p.parse(dump(cdc("t", table, None, lsn=900, ts=T)), 0, 7, "topics/y/g.json"))
    assert again["_event_id"] == row["_event_id"]  # a redelivered copy is the same event


def test_truncate_envelope_on_the_pings_topic_is_quarantined():
    # Pings are not a change stream: a truncate envelope there has no ping_id (docs/contract/sources.md).
    assert reason(pings(), dump(cdc("t", "tracking_pings", None, lsn=900, ts=T))) == "missing_key"


def test_invalid_envelope():
    p = orders()
    assert reason(p, dump(cdc("c", "orders", None, lsn=1, ts=T))) == "invalid_envelope"
    assert reason(p, dump(cdc("r", "orders", None, lsn=1, ts=T))) == "invalid_envelope"
    assert reason(p, dump(cdc("u", "orders", None, lsn=1, ts=T))) == "invalid_envelope"
    for missing in ("lsn", "ts_ms"):
        env = cdc("c", "orders", order(1, T), lsn=1, ts=T)
        del env["source"][missing]
        assert reason(p, dump(env)) == "invalid_envelope"
    env = cdc("c", "orders", order(1, T), lsn=1, ts=T)
    del env["source"]
    assert reason(p, dump(env)) == "invalid_envelope"
    env = cdc("c", "orders", order(1, T), lsn=1, ts=T)
    env["source"]["lsn"] = "1"
    assert reason(p, dump(env)) == "invalid_envelope"
    assert reason(p, b"[1,2]") == "invalid_envelope"
    assert reason(p, b"42") == "invalid_envelope"


def test_missing_key():
    p = orders()
    no_key = {k: v for k, v in order(1, T).items() if k != "order_id"}
    assert reason(p, dump(cdc("c", "orders", no_key, lsn=1, ts=T))) == "missing_key"
    assert reason(p, dump(cdc("c", "orders", order(None, T), lsn=1, ts=T))) == "missing_key"
    assert reason(p, dump(cdc("c", "orders", order("12", T), lsn=1, ts=T))) == "missing_key"
    assert reason(p, dump(cdc("c", "orders", order(True, T), lsn=1, ts=T))) == "missing_key"
    assert reason(p, dump(cdc("c", "orders", order(1.5, T), lsn=1, ts=T))) == "missing_key"
    assert reason(p, dump(cdc("d", "orders", None, before=None, lsn=1, ts=T))) == "missing_key"
    assert reason(p, dump(cdc("d", "orders", None, before={"status": "x"}, lsn=1, ts=T))) == "missing_key"
    assert reason(pings(), dump(ping(None, T))) == "missing_key"
    assert reason(pings(), dump(ping(17, T))) == "missing_key"
    tenants = LineParser(TOPICS["tenants"], H, L)
    assert reason(tenants, dump(cdc("c", "tenants", {"tenant_id": 5}, lsn=1, ts=T))) == "missing_key"


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("total_amount", "abc"),
        ("total_amount", "1.234"),  # more than 2 decimal places
        ("total_amount", "1" + "0" * 37 + ".00"),  # does not fit DECIMAL(38,2), the widest promotion
        ("total_amount", "AvBQ/pOJQ6zEX2VWgAAAAAA="),  # a Connect Decimal of 40 digits: no promotion holds it
        ("total_amount", "NaN"),
        ("total_amount", True),
        ("delivery_fee", [1]),
        ("created_at", "yesterday"),
        ("created_at", 1.5),
        ("created_at", True),
        ("courier_id", "7"),
        ("courier_id", 2**63),
        ("region", 5),
        ("status", {"a": 1}),
    ],
)
def test_invalid_value(column, value):
    assert reason(orders(), dump(cdc("c", "orders", order(1, T, **{column: value}), lsn=1, ts=T))) == (
        f"invalid_value:{column}"
    )


def test_invalid_values_of_pings_and_couriers():
    assert reason(pings(), dump(ping("a", T, lat="x"))) == "invalid_value:lat"
    assert reason(pings(), dump(ping("a", T, speed_kmh=True))) == "invalid_value:speed_kmh"
    assert reason(pings(), b'{"ping_id":"a","recorded_at":"2026-11-02T10:00:00Z","lat":1e999}') == "invalid_value:lat"
    assert reason(pings(), dump(ping("a", T, recorded_at=None))) == "invalid_value:recorded_at"
    assert reason(pings(), dump(ping("a", T, lon=10**400))) == "invalid_value:lon"
    couriers = LineParser(TOPICS["couriers"], H, L)
    line = dump(cdc("c", "couriers", {"courier_id": 1, "active": "yes"}, lsn=1, ts=T))
    assert reason(couriers, line) == "invalid_value:active"


def test_value_encodings_decimal_numbers_and_epoch_micros():
    p = orders()
    line = dump(
        cdc("c", "orders", order(1, T, total_amount=129.9, delivery_fee=12, created_at=ms(T) * 1000), lsn=1, ts=T)
    )
    row = p.row_dict(parse(p, line))
    assert row["total_amount"] == Decimal("129.90") and row["delivery_fee"] == Decimal("12.00")
    assert row["created_at"] == ms(T) * 1000
    assert parse_timestamp_micros("2026-11-02T10:15:30.123456Z") == parse_timestamp_micros(
        "2026-11-02T12:15:30.123456+02:00"
    )
    assert parse_timestamp_micros("1970-01-01T00:00:01") == 1_000_000


def test_the_inline_timestamp_conversion_agrees_with_timekeys():
    p = pings()
    for text in ("2026-11-02T10:15:30.123456", "2026-11-02T10:15:30.123456Z", "2026-11-02T12:15:30.123456+02:00"):
        row = p.row_dict(parse(p, dump(ping("a", T, recorded_at=text))))
        assert row["recorded_at"] == epoch_micros(datetime.fromisoformat(text)) == parse_timestamp_micros(text)


def test_delete_takes_key_from_before_and_nulls_the_rest():
    p = orders()
    row = p.row_dict(parse(p, dump(cdc("d", "orders", None, before={"order_id": 9}, lsn=5, ts=T))))
    assert row["order_id"] == 9 and row["_op"] == "d"
    assert all(row[c.name] is None for c in TOPICS["orders"].columns[1:])
    full_before = dump(cdc("d", "orders", None, before=order(9, T), lsn=5, ts=T))
    assert p.row_dict(parse(p, full_before))["status"] is None


def test_event_identity():
    p = orders()
    a = p.row_dict(parse(p, dump(cdc("u", "orders", order(1, T), lsn=10, ts=T))))
    redelivered = p.parse(dump(cdc("u", "orders", order(1, T), lsn=10, ts=T)), 0, 999, "other")
    assert p.row_dict(redelivered)["_event_id"] == a["_event_id"]
    other_op = p.row_dict(parse(p, dump(cdc("d", "orders", None, before={"order_id": 1}, lsn=10, ts=T))))
    other_lsn = p.row_dict(parse(p, dump(cdc("u", "orders", order(1, T), lsn=11, ts=T))))
    assert len({a["_event_id"], other_op["_event_id"], other_lsn["_event_id"]}) == 3
    pp = pings()
    x = pp.row_dict(parse(pp, dump(ping("id-1", T))))
    y = pp.row_dict(pp.parse(dump(ping("id-1", T, lat=1.0)), 0, 1, "f"))
    assert x["_event_id"] == y["_event_id"] == event_id("logistics.tracking_pings", "id-1")


@pytest.mark.parametrize(
    ("event", "late", "lateness"),
    [
        (H + timedelta(minutes=30), False, 0),
        (H, False, 0),
        (H - timedelta(hours=2), False, 7200),  # exactly L: not late
        (H - timedelta(hours=2, microseconds=1000), True, 7200),
        (H - timedelta(hours=5), True, 18000),
    ],
)
def test_lateness(event, late, lateness):
    p = orders()
    row = p.row_dict(parse(p, dump(cdc("u", "orders", order(1, T), lsn=1, ts=event))))
    assert (row["_is_late"], row["_lateness_seconds"]) == (late, lateness)
    pp = pings()
    prow = pp.row_dict(parse(pp, dump(ping("a", T, recorded_at=iso(event)))))
    assert (prow["_is_late"], prow["_lateness_seconds"]) == (late, lateness)


def test_extra_columns_are_reported_then_parsed_once_known():
    line = dump(cdc("c", "orders", order(1, T, tip_amount=2.5, note={"a": 1}), lsn=1, ts=T))
    res = parse(orders(), line)
    assert res[-1] == {"tip_amount": 2.5, "note": {"a": 1}}
    p = orders({"tip_amount": DoubleType(), "note": StringType()})
    row = p.row_dict(parse(p, line))
    assert row["tip_amount"] == 2.5 and row["note"] == '{"a":1}'
    assert p.row_dict(parse(p, dump(cdc("c", "orders", order(2, T), lsn=2, ts=T))))["tip_amount"] is None
    # typed from its first value: a value of another JSON type is a type change (a schema incident), not a bad value
    bad = dump(cdc("c", "orders", order(2, T, tip_amount="x"), lsn=2, ts=T))
    assert reason(p, bad) == "incompatible_type:tip_amount"
    # a null extra is not a new column
    assert parse(orders(), dump(cdc("c", "orders", order(1, T, extra=None), lsn=1, ts=T)))[-1] is None


def test_infer_type():
    assert infer_iceberg_type(True) == BooleanType()
    assert infer_iceberg_type(3) == LongType()
    assert infer_iceberg_type(3.5) == DoubleType()
    assert infer_iceberg_type("x") == StringType()
    assert infer_iceberg_type({"a": 1}) == StringType()
    assert infer_iceberg_type(None) == StringType()
    assert infer_iceberg_type("2026-01-02T03:04:05Z", True) == TimestampType()
    assert infer_iceberg_type(LongType(), True) == LongType()


def test_parser_is_pure():
    line = dump(cdc("c", "orders", order(1, T), lsn=1, ts=T))
    assert parse(orders(), line) == parse(orders(), line)
    assert json.loads(line)  # the fixture itself is valid JSON


def test_extra_columns_that_cannot_be_added_are_quarantined():
    assert reason(orders(), dump(cdc("c", "orders", order(1, T, _op="x"), lsn=1, ts=T))) == "invalid_envelope"
    assert reason(orders(), dump(cdc("c", "orders", {**order(1, T), "": 1}, lsn=1, ts=T))) == "invalid_envelope"
    assert reason(pings(), dump(ping("a", T, _event_id="x"))) == "invalid_envelope"
    assert reason(pings(), dump(ping("a", T, LAT=1.0))) == "invalid_envelope"
    assert reason(pings(), dump(ping("a", T, tip=1, TIP=2))) == "invalid_envelope"
    dotted = parse(orders(), dump(cdc("c", "orders", order(1, T, **{"a.b": 1}), lsn=1, ts=T)))
    assert dotted[-1] == {"a.b": 1}


def test_the_unchanged_toast_placeholder_is_kept_in_text_columns_and_quarantined_elsewhere():
    """docs/contract/sources.md, "Unchanged TOASTed columns": only a text column can carry it in this contract."""
    placeholder = "__debezium_unavailable_value"
    row = parse(orders(), dump(cdc("u", "orders", order(1, T, region=placeholder, status=placeholder), lsn=1, ts=T)))
    assert not isinstance(row, Rejected)
    named = orders().row_dict(row)
    assert named["region"] == named["status"] == placeholder  # staging nulls and flags it
    for column in ("total_amount", "created_at", "courier_id"):
        line = dump(cdc("u", "orders", order(1, T, **{column: placeholder}), lsn=1, ts=T))
        assert reason(orders(), line) == f"invalid_value:{column}"
