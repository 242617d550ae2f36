"""Column values as Debezium writes them: the column kinds, decimals (strings, numbers, Kafka Connect ``Decimal``) and
timestamps (ISO-8601 strings, integers in the unit of the line's schema block), each decoded or refused with a reason.

Pure functions, used per value by the line parser (:mod:`logistics_platform.lib.bronze.envelope`) and by the fast path's
decimal decoding; what each encoding is and which setting selects it: docs/contract/sources.md.
"""

from __future__ import annotations

import binascii
import json
from datetime import datetime
from decimal import Decimal, InvalidOperation
from math import isfinite
from typing import Any

from pyiceberg.types import (
    BooleanType,
    DecimalType,
    DoubleType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)

from logistics_platform.lib.contract import MONEY_PRECISION, MONEY_SCALE
from logistics_platform.lib.timekeys import epoch_micros

I64 = 2**63
_CENT = Decimal(1).scaleb(-MONEY_SCALE)  # 0.01
_MAX_MONEY = Decimal(10) ** (MONEY_PRECISION - MONEY_SCALE)  # DECIMAL(12,2): at most 10 integer digits
_MONEY_SQL = f"DECIMAL({MONEY_PRECISION},{MONEY_SCALE})"

# Column kinds: how a JSON value becomes a column value.
K_STRING, K_LONG, K_DOUBLE, K_BOOL, K_DECIMAL, K_TIMESTAMP, K_TEXT_OR_JSON = (
    "string",
    "long",
    "double",
    "bool",
    "decimal",
    "timestamp",
    "text_or_json",
)

# Debezium's decimal.handling.mode of the deployment's connector (setting DEBEZIUM_DECIMAL_HANDLING_MODE).
DECIMAL_PRECISE, DECIMAL_STRING, DECIMAL_DOUBLE = "precise", "string", "double"
DECIMAL_MODES = (DECIMAL_PRECISE, DECIMAL_STRING, DECIMAL_DOUBLE)
DECIMAL_MODE_SETTING = "DEBEZIUM_DECIMAL_HANDLING_MODE"
CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
# Integer timestamps of the JsonConverter schema's semantic types, in microseconds per unit (default: micros).
TIMESTAMP_UNITS = {
    "io.debezium.time.Timestamp": 1000,
    "io.debezium.time.MicroTimestamp": 1,
    "org.apache.kafka.connect.data.Timestamp": 1000,
}
NANO_TIMESTAMP = "io.debezium.time.NanoTimestamp"


class BadValue(Exception):
    """A value that does not parse to its column type; ``detail`` says why."""

    def __init__(self, detail: str) -> None:
        self.detail = detail


def kind_of(iceberg_type: IcebergType, *, evolved: bool = False) -> str:
    """The converter kind for a column type (evolved string columns also take non-strings as JSON text)."""
    if isinstance(iceberg_type, StringType):
        return K_TEXT_OR_JSON if evolved else K_STRING
    if isinstance(iceberg_type, LongType | IntegerType):
        return K_LONG
    if isinstance(iceberg_type, DoubleType):
        return K_DOUBLE
    if isinstance(iceberg_type, BooleanType):
        return K_BOOL
    if isinstance(iceberg_type, DecimalType):
        return K_DECIMAL
    if isinstance(iceberg_type, TimestampType):
        return K_TIMESTAMP
    raise TypeError(f"no converter for column type {iceberg_type}")


def infer_iceberg_type(values: list[Any]) -> IcebergType:
    """Type of a newly seen column from its non-null JSON values: bool, long, double, else string."""
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return StringType()
    if kinds == {bool}:
        return BooleanType()
    if kinds == {int}:
        return LongType()
    if kinds <= {int, float}:
        return DoubleType()
    return StringType()


def to_json_text(value: Any) -> str:
    """Compact JSON text of a value (used for columns whose values are not scalars)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def parse_timestamp_micros(value: Any) -> int:
    """Epoch microseconds (UTC) of an ISO-8601 string or an integer of epoch microseconds."""
    t = type(value)
    if t is str:
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            raise BadValue(f"{value!r} is not an ISO-8601 timestamp") from None
        return epoch_micros(dt)
    if t is int:
        if -I64 <= value < I64:
            return value
        raise BadValue(f"{value} is out of range for epoch microseconds")
    raise BadValue(f"expected an ISO-8601 string or epoch microseconds, got {type(value).__name__}")


def connect_decimal_unscaled(text: str) -> int | None:
    """The unscaled integer of a Kafka Connect ``Decimal`` (base64, two's-complement big-endian); None if not base64."""
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    return int.from_bytes(raw, "big", signed=True) if raw else None


def money(d: Decimal, value: Any) -> Decimal:
    """``d`` as the contract's money type (DECIMAL(12,2)), or BadValue naming what does not fit."""
    try:
        if not d.is_finite():
            raise BadValue(f"{value!r} is not a finite number")
        q = d.quantize(_CENT)
    except InvalidOperation:
        raise BadValue(f"{value!r} is not a decimal number") from None
    if q != d:
        raise BadValue(f"{value!r} has more than {MONEY_SCALE} decimal places")
    if abs(q) >= _MAX_MONEY:
        raise BadValue(f"{value!r} does not fit {_MONEY_SQL}")
    return q


def decode_decimal(value: Any, mode: str = DECIMAL_PRECISE, scale: int | None = MONEY_SCALE) -> Decimal:
    """A decimal column value as Debezium writes it: a JSON number, a decimal string, or a Connect ``Decimal``.

    ``scale`` is that of the line's schema block when it has one (None: the schema says the column is a string, so
    no base64), else the contract's. A string is read as a Connect ``Decimal`` when the connector's mode is
    ``precise`` (or the schema says bytes) and it is valid base64 without a dot; a decimal string is always read.
    """
    t = type(value)
    if t is str:
        if scale is not None and mode == DECIMAL_PRECISE and "." not in value:
            unscaled = connect_decimal_unscaled(value)
            if unscaled is not None:
                return money(Decimal(unscaled).scaleb(-scale), value)
        try:
            d = Decimal(value)
        except InvalidOperation:
            hint = (
                "a decimal string or a Connect Decimal (base64)"
                if mode == DECIMAL_PRECISE
                else f"a decimal string (a Connect Decimal is read with {DECIMAL_MODE_SETTING}=precise)"
            )
            raise BadValue(f"{value!r} is not {hint}; check {DECIMAL_MODE_SETTING} (now {mode})") from None
        return money(d, value)
    if t is int:
        return money(Decimal(value), value)
    if t is float:
        return money(Decimal(repr(value)), value)
    if t is dict and type(value.get("scale")) is int and type(value.get("value")) is str:
        # io.debezium.data.VariableScaleDecimal: a numeric column without a declared scale.
        unscaled = connect_decimal_unscaled(value["value"])
        if unscaled is not None:
            return money(Decimal(unscaled).scaleb(-value["scale"]), value)
    raise BadValue(f"expected a decimal string, a number or a Connect Decimal, got {type(value).__name__}")


def convert(kind: str, value: Any) -> Any:
    """A non-null JSON value as a column value of ``kind``; raises BadValue when it does not parse."""
    t = type(value)
    if kind == K_STRING:
        if t is str:
            return value
        raise BadValue(f"expected a string, got {t.__name__}")
    if kind == K_LONG:
        if t is int and -I64 <= value < I64:
            return value
        raise BadValue(f"expected a 64-bit integer, got {value!r}")
    if kind == K_DOUBLE:
        if t is float:
            if isfinite(value):
                return value
            raise BadValue(f"{value!r} is not a finite number")
        if t is int:
            try:
                return float(value)
            except OverflowError:
                raise BadValue(f"{value} is out of range for a double") from None
        raise BadValue(f"expected a number, got {t.__name__}")
    if kind == K_TIMESTAMP:
        return parse_timestamp_micros(value)
    if kind == K_DECIMAL:
        return decode_decimal(value, DECIMAL_STRING)
    if kind == K_BOOL:
        if t is bool:
            return value
        raise BadValue(f"expected true or false, got {value!r}")
    if kind == K_TEXT_OR_JSON:
        return value if t is str else to_json_text(value)
    raise ValueError(f"unknown column kind {kind!r}")


def schema_encodings(schema: Any) -> dict[str, tuple[str, int | None]] | None:
    """Per row column, what a JsonConverter schema block says of its encoding; None when it says nothing usable.

    ``("decimal", scale)`` for a Connect ``Decimal`` (bytes), ``("decimal", None)`` for a column sent as a string
    or number, ``("timestamp", micros per unit)`` for an integer timestamp type (0: nanoseconds).
    """
    try:
        row = next(f for f in schema["fields"] if f.get("field") == "after")
        out: dict[str, tuple[str, int | None]] = {}
        for f in row["fields"]:
            name = f.get("name")
            if name == CONNECT_DECIMAL:
                out[f["field"]] = ("decimal", int(f["parameters"]["scale"]))
            elif name in TIMESTAMP_UNITS:
                out[f["field"]] = ("timestamp", TIMESTAMP_UNITS[name])
            elif name == NANO_TIMESTAMP:
                out[f["field"]] = ("timestamp", 0)
            elif f.get("type") != "bytes" and name != VARIABLE_SCALE_DECIMAL:
                out[f["field"]] = ("decimal", None)
        return out
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration):
        return None  # a schema block we cannot read: the contract and the setting decide
