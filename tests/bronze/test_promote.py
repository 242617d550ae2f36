"""Type promotion of bronze columns (docs/contract/sources.md, "Sources that change"): the pure rules of
lib/bronze/values.py, what each parse path makes of a wider value or a wider declared type, and an ingest that
promotes a column in place (JSON without and with schemas, Avro) with every line accounted for."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.types import DecimalType, DoubleType, FloatType, IcebergType, IntegerType, LongType, StringType

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.avro import read_file, row_fields
from logistics_platform.lib.bronze.blocks import BlockTask
from logistics_platform.lib.bronze.envelope import LineParser, Rejected, Widen
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import list_hour_files
from logistics_platform.lib.bronze.pool import run_block
from logistics_platform.lib.bronze.tables import add_columns
from logistics_platform.lib.bronze.values import (
    CONNECT_DECIMAL,
    K_INT,
    BadValue,
    convert,
    decode_decimal,
    promotion,
    promotions,
    schema_encodings,
    typed,
)
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.settings import Settings, local_settings
from tests.support.avro_encode import envelope_schema
from tests.support.bronze import HOUR, account_hour, cdc, dump, order, write_file

T = HOUR + timedelta(minutes=5)
ORDERS, PAYMENTS = "oltp.public.orders", "oltp.public.payments"
BIG = "123456789012.34"  # numeric(14,2): two integer digits more than the contract's numeric(12,2)


def b64(unscaled: int) -> str:
    """A Connect Decimal as the JsonConverter writes it (shortest two's-complement big-endian bytes, base64)."""
    return base64.b64encode(unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)).decode()


@pytest.mark.parametrize(
    ("current", "wanted", "promoted"),
    [
        (IntegerType(), LongType(), LongType()),
        (FloatType(), DoubleType(), DoubleType()),
        (DecimalType(12, 2), DecimalType(14, 2), DecimalType(14, 2)),
        (DecimalType(12, 2), DecimalType(38, 2), DecimalType(38, 2)),
        (DecimalType(12, 2), DecimalType(14, 3), None),  # a scale change: never a promotion
        (DecimalType(12, 2), DecimalType(12, 2), None),  # nothing to do
        (DecimalType(14, 2), DecimalType(12, 2), None),  # never narrowed
        (LongType(), IntegerType(), None),
        (LongType(), DoubleType(), None),  # not an Iceberg promotion
        (IntegerType(), DoubleType(), None),
        (StringType(), LongType(), None),
        (LongType(), StringType(), None),
    ],
)
def test_only_icebergs_promotions_are_promotions(
    current: IcebergType, wanted: IcebergType, promoted: IcebergType | None
) -> None:
    assert promotion(current, wanted) == promoted


def test_promotions_keep_the_columns_a_record_declares_wider() -> None:
    current = {"a": DecimalType(12, 2), "b": LongType(), "c": IntegerType(), "d": DecimalType(12, 2)}
    declared = {"a": DecimalType(14, 2), "b": IntegerType(), "c": LongType(), "d": DecimalType(14, 4), "e": LongType()}
    assert promotions(current, declared) == {"a": DecimalType(14, 2), "c": LongType()}


@pytest.mark.parametrize(
    ("value", "mode", "scale", "precision", "exact"),
    [
        (BIG, "string", 2, 14, BIG),
        (123456789012.34, "string", 2, 14, BIG),  # decimal.handling.mode=double
        (12345678901234, "string", 2, 16, "12345678901234.00"),  # a JSON integer: 14 integer digits
        (b64(12345678901234), "precise", 2, 14, BIG),  # a Connect Decimal without schema: the column's scale
        (b64(123456789012340), "precise", 3, 14, BIG),  # of a schema block's scale 3, exact at scale 2
        ({"scale": 4, "value": b64(1234567890123400)}, "precise", 2, 14, BIG),  # VariableScaleDecimal
        ("-" + "9" * 36 + ".99", "string", 2, 38, "-" + "9" * 36 + ".99"),
    ],
)
def test_a_decimal_too_wide_for_its_column_names_the_precision_it_needs(
    value: Any, mode: str, scale: int, precision: int, exact: str
) -> None:
    with pytest.raises(BadValue) as caught:
        decode_decimal(value, mode, scale)
    assert caught.value.to == DecimalType(precision, 2)
    assert "does not fit DECIMAL(12,2)" in caught.value.detail
    assert decode_decimal(value, mode, scale, DecimalType(precision, 2)) == Decimal(exact)


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("1" + "0" * 37 + ".00", "does not fit DECIMAL(12,2)"),  # 40 digits: beyond DECIMAL(38,2)
        ("1.234", "more than 2 decimal places"),  # a scale change, never a promotion
        ("12345678901234.567", "more than 2 decimal places"),  # wider and another scale: still a scale change
    ],
)
def test_what_no_promotion_holds_stays_a_bad_value(value: str, detail: str) -> None:
    with pytest.raises(BadValue) as caught:
        decode_decimal(value, "string")
    assert caught.value.to is None and detail in caught.value.detail


def test_an_int_column_promotes_past_32_bits_and_a_long_never() -> None:
    assert convert(K_INT, 2**31 - 1) == 2**31 - 1
    with pytest.raises(BadValue) as caught:
        convert(K_INT, 2**31)
    assert caught.value.to == LongType()
    with pytest.raises(BadValue) as caught:
        convert(K_INT, 2**63)
    assert caught.value.to is None
    values, good = typed(K_INT, pa.array([1, 2**31, None, -(2**31)], pa.int64()))
    assert values.to_pylist() == [1, None, None, -(2**31)] and good is not None and good.tolist() == [1, 0, 1, 1]


def connect_schema(precision: int | None, scale: int = 2, extra: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    """A JsonConverter schema block whose ``after`` declares total_amount as a Connect Decimal."""
    params = {"scale": str(scale)} | ({"connect.decimal.precision": str(precision)} if precision else {})
    amount = {"field": "total_amount", "type": "bytes", "name": CONNECT_DECIMAL, "parameters": params}
    return {"fields": [{"field": "after", "fields": [amount, *extra]}]}


def test_a_schema_block_declares_decimal_precision_and_unnamed_number_types() -> None:
    extra = ({"field": "n", "type": "int32"}, {"field": "m", "type": "int64"}, {"field": "x", "type": "float"})
    extra += ({"field": "ts", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},)
    parsed = schema_encodings(connect_schema(14, extra=extra))
    assert parsed is not None
    encodings, declared = parsed
    assert encodings["total_amount"] == ("decimal", 2) and encodings["ts"] == ("timestamp", 1)
    assert declared == {"total_amount": DecimalType(14, 2), "n": IntegerType(), "m": LongType(), "x": FloatType()}
    assert schema_encodings(connect_schema(None)) == ({"total_amount": ("decimal", 2)}, {})
    # The AvroConverter's precision of a Decimal without one (64): beyond Iceberg's decimals, nothing declared.
    assert schema_encodings(connect_schema(64)) == ({"total_amount": ("decimal", 2)}, {})


def parser(mode: str = "precise", **types: IcebergType) -> LineParser:
    return LineParser(bs.TOPICS["orders"], HOUR, 7200, dict(types), mode)


def line(amount: Any, schema: dict[str, Any] | None = None) -> bytes:
    env = cdc("c", "orders", order(1, T, total_amount=amount), lsn=10, ts=T)
    return dump({"schema": schema, "payload": env} if schema else env)


def test_the_line_parser_asks_for_the_promotion_a_value_or_its_schema_needs() -> None:
    widen = Widen({"total_amount": DecimalType(14, 2)})
    assert parser("string").parse(line(BIG), 0, 0, "f") == widen
    assert parser().parse(line(b64(12345678901234)), 0, 0, "f") == widen
    # A schema block declaring numeric(14,2) promotes the column before any value needs it.
    assert parser().parse(line(b64(1290), connect_schema(14)), 0, 0, "f") == widen
    assert parser().parse(line(b64(1290), connect_schema(38)), 0, 0, "f") == Widen({"total_amount": DecimalType(38, 2)})
    assert isinstance(parser().parse(line(b64(1290), connect_schema(12)), 0, 0, "f"), list)
    # Another scale is a scale change: the values decide (more decimal places: a schema incident, lib/bronze/incidents).
    assert isinstance(parser().parse(line(b64(1290), connect_schema(14, 3)), 0, 0, "f"), list)
    bad = parser().parse(line(b64(1291), connect_schema(14, 3)), 0, 0, "f")
    assert isinstance(bad, Rejected) and bad.reason == "incompatible_type:total_amount"
    # Once promoted (the table's type comes back through ``evolved``), the value is a row like any other.
    promoted = parser("string", total_amount=DecimalType(14, 2))
    row = promoted.parse(line(BIG), 0, 0, "f")
    assert isinstance(row, list) and promoted.row_dict(row)["total_amount"] == Decimal(BIG)
    assert promoted.column_names == parser().column_names  # a promoted contract column keeps its place


def test_every_parse_path_asks_for_the_same_promotion(tmp_path: Path) -> None:
    """The line parser, the JSON fast path with its isolation, and Avro (vectorised or not) all stop at the first
    value that needs a wider column, and read the same lines as rows once the column is promoted."""
    envelopes = [cdc("c", "orders", order(i, T), lsn=10 * i, ts=T) for i in range(1, 41)]
    envelopes.insert(20, cdc("c", "orders", order(99, T, total_amount=BIG), lsn=995, ts=T))
    block = b"\n".join(dump(e) for e in envelopes)
    spec = bs.TOPICS["orders"]
    for types in ({}, {"total_amount": DecimalType(14, 2)}):
        table_schema = bs.table_schema(spec) if not types else promoted_schema(DecimalType(14, 2))
        arrow = schema_to_pyarrow(table_schema, include_field_ids=True)
        results = []
        for fast in (0, 8192):
            task = BlockTask(
                "orders", HOUR, 7200, tuple(types.items()), arrow, block, 0, 0, "f.json", fast, None, "string"
            )
            results.append(run_block(task))
        landed = write_avro_file(tmp_path / str(len(types)), envelopes, 12)
        for vectorised in (True, False):
            results.append(read_file(parser(**types), landed, arrow, vectorised=vectorised)[0])
        for res in results:
            if not types:
                assert res.wider == {"total_amount": DecimalType(14, 2)} and res.rows is None, res
            else:
                assert not res.wider and not res.quarantine and res.rows is not None and res.rows.num_rows == 41
                amounts = dict(zip(res.rows["order_id"].to_pylist(), res.rows["total_amount"].to_pylist(), strict=True))
                assert amounts[99] == Decimal(BIG) and amounts[1] == Decimal("129.90")


def promoted_schema(amount: DecimalType) -> Any:
    """The orders table's schema with total_amount promoted (what the table holds after update_column)."""
    spec = bs.TOPICS["orders"]
    return bs.table_schema(
        replace(spec, columns=tuple(widened(c, "total_amount", amount.precision) for c in spec.columns))
    )


def write_avro_file(landing: Path, envelopes: list[dict[str, Any]], precision: int, offset: int = 0) -> Any:
    """The envelopes as one Avro landing file whose writer schema declares total_amount numeric(precision,2)."""
    from tests.bronze.test_avro import write_avro

    spec = bs.TOPICS["orders"]
    wider = replace(spec, columns=tuple(widened(c, "total_amount", precision) for c in spec.columns))
    path = write_avro(landing, ORDERS, HOUR, 0, offset, envelopes, schema=envelope_schema(wider))
    return next(f for f in list_hour_files(landing, ORDERS, HOUR) if f.path == path)


def widened(c: bs.Column, name: str, precision: int) -> bs.Column:
    return replace(c, type=DecimalType(precision, 2)) if c.name == name else c


def test_an_avro_writer_schema_declaring_a_wider_decimal_promotes_before_any_record(tmp_path: Path) -> None:
    landed = write_avro_file(tmp_path, [cdc("c", "orders", order(1, T), lsn=10, ts=T)], 16)
    fields = row_fields(envelope_schema(bs.TOPICS["orders"]), True)
    assert fields is not None and fields["total_amount"].precision == 12
    arrow = schema_to_pyarrow(bs.table_schema(bs.TOPICS["orders"]), include_field_ids=True)
    res, _ = read_file(parser(), landed, arrow)
    assert res.wider == {"total_amount": DecimalType(16, 2)} and res.rows is None


# -- an ingest: the column promoted in place, in the open hour's appends, on every landing format ------------------
def bronze(settings: Settings, table: str, sql: str) -> list[tuple[Any, ...]]:
    loc = load_catalog(settings).load_table(f"bronze.{table}").metadata_location
    con = connect()
    try:
        return con.execute(sql.replace("{t}", f"iceberg_scan('{loc}')")).fetchall()
    finally:
        con.close()


def test_an_ingest_promotes_the_column_in_place_and_keeps_every_line(tmp_path: Path) -> None:
    s = local_settings(tmp_path)
    land = s.landing_dir
    first = [cdc("c", "orders", order(i, T), lsn=10 * i, ts=T) for i in range(1, 6)]
    write_file(land, ORDERS, HOUR, 0, 0, [dump(e) for e in first])
    r1 = ingest_hour(s, HOUR)
    assert r1.topics["orders"].rows == 5
    # A table holding an int column (one a tool created from a Connect schema's int32, say).
    add_columns(load_catalog(s), "bronze.orders", {"priority": IntegerType()}, "a test")
    # The OLTP team widens total_amount to numeric(14,2), then writes a wider amount: schemaless JSON first; and an
    # integer beyond 32 bits in the int column.
    wide = [cdc("u", "orders", order(1, T, total_amount=BIG, priority=2**40), lsn=1000, ts=T)]
    wide += [cdc("c", "orders", order(i, T, priority=i), lsn=10 * i, ts=T) for i in range(6, 30)]
    write_file(land, ORDERS, HOUR, 0, 5, [dump(e) for e in wide])
    r2 = ingest_hour(s, HOUR)
    assert r2.mode == "append", r2.mode_reason  # no rebuild: the new file appended
    orders = r2.topics["orders"]
    assert (orders.read_rows, orders.read_quarantined, orders.rows, orders.quarantined) == (25, 0, 30, 0)
    assert orders.added_columns == {
        "total_amount": "decimal(14, 2) (promoted from decimal(12, 2))",
        "priority": "long (promoted from int)",
    }
    assert bronze(s, "orders", "select priority from {t} where _lsn in (60, 1000) order by _lsn") == [(6,), (2**40,)]
    # Then a JSON file with schemas declaring numeric(16,2) and an Avro file declaring numeric(18,2): each promotes.
    declared = cdc("u", "orders", order(2, T, total_amount=b64(1234567890123456)), lsn=1001, ts=T)
    schema = connect_schema(16) | {"type": "struct"}
    write_file(land, ORDERS, HOUR, 1, 0, [dump({"schema": schema, "payload": declared})])
    write_avro_file(land, [cdc("u", "orders", order(3, T, total_amount="9" * 16 + ".99"), lsn=1002, ts=T)], 18, 30)
    r3 = ingest_hour(s, HOUR)
    assert r3.mode == "append" and (r3.topics["orders"].read_rows, r3.topics["orders"].quarantined) == (2, 0)
    table = load_catalog(s).load_table("bronze.orders")
    assert table.schema().find_field("total_amount").field_type == DecimalType(18, 2)
    contract_names = [f.name for f in bs.table_schema(bs.TOPICS["orders"]).fields]
    assert [f.name for f in table.schema().fields] == [*contract_names, "priority"]  # promoted in place
    # DuckDB reads the older files (written as DECIMAL(12,2)) and the newer ones as the promoted type.
    got = bronze(s, "orders", "select _lsn, total_amount, typeof(total_amount) from {t} where order_id <= 3 order by 1")
    assert got == [
        (10, Decimal("129.90"), "DECIMAL(18,2)"),
        (20, Decimal("129.90"), "DECIMAL(18,2)"),
        (30, Decimal("129.90"), "DECIMAL(18,2)"),
        (1000, Decimal(BIG), "DECIMAL(18,2)"),
        (1001, Decimal("12345678901234.56"), "DECIMAL(18,2)"),
        (1002, Decimal("9" * 16 + ".99"), "DECIMAL(18,2)"),
    ]
    assert all(acc.balanced for acc in account_hour(s, HOUR).values())
    # A full re-ingest of the hour gives the same rows under the promoted type.
    before = bronze(s, "orders", "select * from {t} order by _source_file, _offset")
    assert ingest_hour(s, HOUR, replace=True).mode == "replace"
    assert bronze(s, "orders", "select * from {t} order by _source_file, _offset") == before
    assert bronze(s, "quarantine", "select count(*) from {t}") == [(0,)]


def test_rows_parsed_before_a_promotion_are_written_as_the_wider_type() -> None:
    """A worker may have parsed a block with the column's old type while another block promoted it."""
    from logistics_platform.lib.bronze.writer import conform

    old = schema_to_pyarrow(bs.table_schema(bs.TOPICS["orders"]), include_field_ids=True)
    new = schema_to_pyarrow(promoted_schema(DecimalType(14, 2)), include_field_ids=True)
    rows = pa.Table.from_pylist([{"order_id": 1, "total_amount": Decimal("129.90")}], schema=old)
    out = conform(rows, new)
    assert out.schema.equals(new) and out.column("total_amount").to_pylist() == [Decimal("129.90")]
