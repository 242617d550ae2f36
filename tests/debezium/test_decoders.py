"""Debezium's encodings decoded by both bronze parsers, on the real engine's output (tests/debezium/fixtures).

No JVM here: the fixtures are what the real connector wrote. The per-line parser is the source of truth; the
vectorised path must give exactly its rows, or decline.
"""

from __future__ import annotations

import base64
import json
import random
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import schema_to_pyarrow

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.blocks import BlockResult, BlockTask
from logistics_platform.lib.bronze.envelope import LineParser, Rejected
from logistics_platform.lib.bronze.pool import run_block
from logistics_platform.lib.bronze.values import DECIMAL_MODE_SETTING, connect_decimal_unscaled, decode_decimal

FIXTURES = Path(__file__).parent / "fixtures"
JSON_CONFIGS = ("string-json", "string-json-schemas", "precise-json", "precise-json-schemas")
HOUR = datetime(2026, 12, 2)
EDGE_AMOUNTS = {900001: "0.01", 900002: "1.28", 900003: "99999999.99", 900004: "9999999999.99"}


def lines(config: str, table: str) -> list[bytes]:
    return (FIXTURES / config / f"oltp.public.{table}.jsonl").read_bytes().splitlines()


def parsed(config: str, table: str, mode: str) -> list[Any]:
    parser = LineParser(bs.TOPICS[table], HOUR, 7200, decimal_mode=mode)
    return [(parser, parser.parse(line, 0, i, "f.json")) for i, line in enumerate(lines(config, table))]


def unscaled_b64(unscaled: int) -> str:
    """A Connect Decimal as the JsonConverter writes it: the shortest two's-complement big-endian bytes, base64."""
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


@pytest.mark.parametrize("config", JSON_CONFIGS)
@pytest.mark.parametrize("mode", ["precise", "string"])
def test_every_real_line_decodes_and_the_edge_amounts_are_exact(config: str, mode: str) -> None:
    if config == "precise-json" and mode == "string":
        pytest.skip("the connector's mode and the setting disagree: see the quarantine test below")
    for table in ("tenants", "couriers", "orders", "payments"):
        rows = parsed(config, table, mode)
        assert rows and not [r for _, r in rows if isinstance(r, Rejected)], (config, table)
    amounts = {r[0]: p.row_dict(r)["total_amount"] for p, r in parsed(config, "orders", mode) if r[0] in EDGE_AMOUNTS}
    if not config.endswith("schemas"):  # the -schemas folders keep only an insert and a delete
        assert amounts == {k: Decimal(v) for k, v in EDGE_AMOUNTS.items()}


def test_precise_decimals_read_as_strings_go_to_quarantine_naming_the_setting() -> None:
    rejected = [r for _, r in parsed("precise-json", "orders", "string") if isinstance(r, Rejected)]
    assert rejected and {r.reason for r in rejected} == {"invalid_value:total_amount"}
    assert all(DECIMAL_MODE_SETTING in r.detail and "precise" in r.detail for r in rejected), rejected[0].detail


def test_the_schema_block_says_bytes_whatever_the_setting() -> None:
    for mode in ("precise", "string", "double"):
        rows = parsed("precise-json-schemas", "orders", mode)
        assert not [r for _, r in rows if isinstance(r, Rejected)], mode
        insert = next(p.row_dict(r) for p, r in rows if p.row_dict(r)["_op"] == "c")
        assert insert["total_amount"] == Decimal("47.06")


def test_precise_and_string_engines_give_the_same_values() -> None:
    """The same workload under both connector modes: every decimal and timestamp the same."""
    for table in ("orders", "payments"):
        precise = {(r[0], p.row_dict(r)["_op"]): p.row_dict(r) for p, r in parsed("precise-json", table, "precise")}
        string = {(r[0], p.row_dict(r)["_op"]): p.row_dict(r) for p, r in parsed("string-json", table, "precise")}
        shared = precise.keys() & string.keys()
        assert shared, table
        decimals = sorted(LineParser(bs.TOPICS[table], HOUR, 7200).scales)
        assert decimals, table
        for k in shared:
            assert [precise[k][c] for c in decimals] == [string[k][c] for c in decimals], k


def test_connect_decimal_bytes() -> None:
    assert connect_decimal_unscaled("EmI=") == 4706
    assert connect_decimal_unscaled("/w==") == -1
    assert connect_decimal_unscaled("AA==") == 0
    assert connect_decimal_unscaled("") is None
    assert connect_decimal_unscaled("EmI") is None  # no padding: not what the converter writes
    assert connect_decimal_unscaled("12.5") is None
    assert decode_decimal("EmI=") == Decimal("47.06")
    assert decode_decimal("EmI=", scale=1) == Decimal("470.6")
    assert decode_decimal(unscaled_b64(-(10**12) + 1)) == Decimal("-9999999999.99")
    assert decode_decimal({"scale": 3, "value": unscaled_b64(47060)}) == Decimal("47.06")  # VariableScaleDecimal
    assert decode_decimal("12.30", "precise") == decode_decimal("12.30", "string") == Decimal("12.30")
    assert decode_decimal(12.3, "string") == Decimal("12.30")


@pytest.mark.parametrize(
    ("value", "mode", "scale", "detail"),
    [
        (unscaled_b64(10**38), "precise", 2, "does not fit DECIMAL(12,2)"),  # 39 digits: beyond any promotion
        (unscaled_b64(1), "precise", 3, "more than 2 decimal places"),
        ("EmI=", "string", 2, DECIMAL_MODE_SETTING),
        ("EmI=", "double", 2, DECIMAL_MODE_SETTING),
        ("EmI=", "precise", None, DECIMAL_MODE_SETTING),  # the schema says a string column
        ("1e40", "string", 2, "does not fit DECIMAL(12,2)"),
        ("abc", "precise", 2, DECIMAL_MODE_SETTING),
    ],
)
def test_what_does_not_decode_says_why(value: str, mode: str, scale: int | None, detail: str) -> None:
    parser = LineParser(bs.TOPICS["orders"], HOUR, 7200, decimal_mode=mode)
    envelope = json.loads(lines("precise-json", "orders")[0])
    envelope["after"]["total_amount"] = value
    line = json.dumps(envelope)
    if scale != 2:
        schema_line = json.loads(lines("precise-json-schemas", "orders")[0])
        after = next(f for f in schema_line["schema"]["fields"] if f["field"] == "after")
        field = next(f for f in after["fields"] if f["field"] == "total_amount")
        if scale is None:
            field.clear()
            field.update({"type": "string", "optional": False, "field": "total_amount"})
        else:
            field["parameters"]["scale"] = str(scale)
        line = json.dumps({"schema": schema_line["schema"], "payload": envelope})
    res = parser.parse(line.encode(), 0, 0, "f.json")
    # A declared scale other than the column's is a type change: a schema incident (docs/operations.md).
    expected = "incompatible_type" if scale not in (2, None) else "invalid_value"
    assert isinstance(res, Rejected) and res.reason == f"{expected}:total_amount", res
    assert detail in res.detail, res.detail


def test_integer_timestamps_follow_the_schema_block() -> None:
    parser = LineParser(bs.TOPICS["orders"], HOUR, 7200)
    schema_line = json.loads(lines("precise-json-schemas", "orders")[0])
    after = next(f for f in schema_line["schema"]["fields"] if f["field"] == "after")
    micros = 1_796_166_666_654_347
    units = {
        "created_at": ("io.debezium.time.MicroTimestamp", micros),
        "promised_at": ("io.debezium.time.Timestamp", micros // 1000),
        "updated_at": ("io.debezium.time.NanoTimestamp", micros * 1000),
    }
    for f in after["fields"]:
        if f["field"] in units:
            f.update(type="int64", name=units[f["field"]][0])
    for name, (_, value) in units.items():
        schema_line["payload"]["after"][name] = value
    row = parser.row_dict(parser.parse(json.dumps(schema_line).encode(), 0, 0, "f.json"))
    assert (row["created_at"], row["promised_at"], row["updated_at"]) == (micros, micros // 1000 * 1000, micros)
    del schema_line["schema"]  # no schema block: an integer is epoch microseconds
    no_schema = parser.parse(json.dumps(schema_line["payload"]).encode(), 0, 0, "f.json")
    assert parser.row_dict(no_schema)["updated_at"] == micros * 1000


# ------------------------------------------------------------------------- both parsers agree, seeded property
def _both(table: str, block: bytes, mode: str) -> tuple[BlockResult, BlockResult]:
    schema = schema_to_pyarrow(bs.table_schema(bs.TOPICS[table]), include_field_ids=True)
    fast, slow = (
        run_block(BlockTask(table, HOUR, 7200, (), schema, block, 0, 10, "f.json", n, decimal_mode=mode))
        for n in (64, 0)
    )
    return fast, slow


def _random_amount(rng: random.Random) -> Any:
    pick = rng.random()
    unscaled = rng.choice([0, 1, -1, 4706, 10**12 - 1, -(10**12) + 1, 10**12, rng.randrange(-(10**13), 10**13)])
    if pick < 0.5:
        return unscaled_b64(unscaled)
    if pick < 0.7:
        return f"{Decimal(unscaled).scaleb(-2):f}"
    if pick < 0.8:
        return rng.choice(["12.5", "1e3", "abcd", "EmI", "", "-0.00", "AAAAAAAAAAAA", "/w==", "12,50"])
    if pick < 0.9:
        return None
    return unscaled / 100


@pytest.mark.parametrize("mode", ["precise", "string"])
@pytest.mark.parametrize("seed", range(6))
def test_both_parsers_agree_on_random_decimal_encodings(mode: str, seed: int) -> None:
    rng = random.Random(seed)
    base = [json.loads(x) for x in lines("precise-json", "orders")]
    out = []
    for i in range(40):
        envelope = json.loads(json.dumps(rng.choice(base)))
        row = envelope["after"] or envelope["before"]
        row["order_id"] = i + 1
        if envelope["after"] is not None:
            for column in ("total_amount", "delivery_fee"):
                row[column] = _random_amount(rng) if rng.random() < 0.3 else row[column]
        out.append(json.dumps(envelope, separators=(",", ":")).encode())
    # Whole blocks of clean lines are taken fast; every line of the block then goes through both paths.
    for size in (1, 5, 40):
        for at in range(0, len(out), size):
            block = b"\n".join(out[at : at + size]) + b"\n"
            fast, slow = _both("orders", block, mode)
            assert (fast.rows is None) == (slow.rows is None)
            if fast.rows is not None:
                assert fast.rows.equals(slow.rows), (mode, seed, size, at)
            assert (fast.quarantine, fast.lines, fast.reasons) == (slow.quarantine, slow.lines, slow.reasons)


def test_the_fast_path_takes_real_connector_blocks_whole() -> None:
    for config in ("precise-json", "string-json"):
        for table in ("tenants", "couriers", "orders", "payments"):
            block = b"\n".join(lines(config, table)) + b"\n"
            fast, slow = _both(table, block, "precise")
            assert fast.whole_block is True, (config, table)
            assert fast.rows is not None and slow.rows is not None and fast.rows.equals(slow.rows), (config, table)
