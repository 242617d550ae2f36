"""Value conversions of every bronze parse path, one definition of each rule (column kinds, decimals, timestamps,
event ids), per value for the line parser (:func:`convert`) and per Arrow column for the vectorised paths
(:func:`typed`). Encodings and settings: docs/contract/sources.md; design: docs/internals/parsers.md.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Context, Decimal, InvalidOperation
from math import isfinite
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.types import (
    BooleanType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
)

from logistics_platform.lib.contract import MONEY_PRECISION, MONEY_SCALE, MONEY_TEXT_RE
from logistics_platform.lib.timekeys import epoch_micros

I64 = 2**63  # a bigint column, an lsn, a txId
I32 = 2**31  # an int column
MAX_PRECISION = 38  # Iceberg's widest decimal: what a decimal column can be promoted to
I53 = 2**53  # the envelope's ts_ms and source.ts_ms (epoch milliseconds): JSON's exact integers
TS_UTC = pa.timestamp("us", "UTC")
# The ISO-8601 form the vectorised paths cast with Arrow (0 to 6 fraction digits, as datetime.fromisoformat reads).
TIMESTAMP_RE = (
    r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?Z$"
)
MONEY_RE = f"^{MONEY_TEXT_RE}$"  # the canonical decimal.handling.mode=string text of a money value
money_text_match = re.compile(MONEY_TEXT_RE).fullmatch
MONEY_TYPE = pa.decimal128(MONEY_PRECISION, MONEY_SCALE)
MAX_UNSCALED = 10**MONEY_PRECISION  # DECIMAL(12,2): the unscaled value has at most 12 digits
IDENTITY_SEPARATOR = "\x1f"  # joins the parts of an event identity before hashing (see event_id)
_HASHER = hashlib.blake2b(digest_size=16)
MONEY_DECIMAL = DecimalType(MONEY_PRECISION, MONEY_SCALE)
_WIDE = Context(prec=2 * MAX_PRECISION)  # quantizes any decimal a promoted column holds (the default context: 28)

# Column kinds: how a JSON value becomes a column value.
K_STRING, K_LONG, K_INT, K_DOUBLE, K_BOOL = "string", "long", "int", "double", "bool"
K_DECIMAL, K_TIMESTAMP, K_TEXT_OR_JSON = "decimal", "timestamp", "text_or_json"

# Debezium's decimal.handling.mode of the deployment's connector (setting DEBEZIUM_DECIMAL_HANDLING_MODE).
DECIMAL_PRECISE, DECIMAL_STRING, DECIMAL_DOUBLE = "precise", "string", "double"
DECIMAL_MODES = (DECIMAL_PRECISE, DECIMAL_STRING, DECIMAL_DOUBLE)
DECIMAL_MODE_SETTING = "DEBEZIUM_DECIMAL_HANDLING_MODE"
CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
# Integer timestamps of the JsonConverter schema's semantic types, in microseconds per unit (default: micros; 0: nanos).
CONNECT_TIMESTAMP, MICRO_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp", "io.debezium.time.MicroTimestamp"
TIMESTAMP_UNITS = {"io.debezium.time.Timestamp": 1000, MICRO_TIMESTAMP: 1, CONNECT_TIMESTAMP: 1000}
TIMESTAMP_UNITS["io.debezium.time.NanoTimestamp"] = 0


class BadValue(Exception):
    """A value that does not parse to its column type; ``detail`` says why. With ``to``: the column holds it once
    promoted to that type (an Iceberg promotion), so the column is promoted rather than the line quarantined."""

    def __init__(self, detail: str, to: IcebergType | None = None) -> None:
        self.detail, self.to = detail, to


def promotion(current: IcebergType, wanted: IcebergType) -> IcebergType | None:
    """``wanted`` when it is an Iceberg promotion of ``current`` (int -> long, float -> double, a decimal's precision
    up to 38 at the same scale), else None (equal, narrower or incompatible: not a promotion)."""
    if isinstance(current, DecimalType) and isinstance(wanted, DecimalType):
        ok = current.scale == wanted.scale and current.precision < wanted.precision <= MAX_PRECISION
        return wanted if ok else None
    pairs = ((IntegerType, LongType), (FloatType, DoubleType))
    return wanted if any(isinstance(current, a) and isinstance(wanted, b) for a, b in pairs) else None


def promotions(current: dict[str, IcebergType], declared: dict[str, IcebergType]) -> dict[str, IcebergType]:
    """Column -> the type it is promoted to, of the ``current`` columns a record schema ``declares`` wider."""
    return {n: p for n, t in declared.items() if n in current and (p := promotion(current[n], t)) is not None}


# Column type -> converter kind, by exact class (pyiceberg's primitive types have no subclasses).
_KINDS = {StringType: K_STRING, LongType: K_LONG, IntegerType: K_INT, DoubleType: K_DOUBLE, BooleanType: K_BOOL}
_KINDS |= {DecimalType: K_DECIMAL, TimestampType: K_TIMESTAMP}


def kind_of(iceberg_type: IcebergType, *, evolved: bool = False) -> str:
    """The converter kind for a column type (evolved string columns also take non-strings as JSON text)."""
    kind = _KINDS.get(type(iceberg_type))
    if kind is None:
        raise TypeError(f"no converter for column type {iceberg_type}")
    return K_TEXT_OR_JSON if evolved and kind == K_STRING else kind


# The type of a newly seen column, by the Python type of its first JSON value (any other: string).
_INFERRED: dict[type, IcebergType] = {bool: BooleanType(), int: LongType(), float: DoubleType()}


def infer_iceberg_type(value: Any, timestamps: bool = False) -> IcebergType:
    """Type of a newly seen column from its first JSON value: bool, long, double, else string (with ``timestamps``, a
    timestamp for ISO-8601 UTC text); a type given for the value: that type (a column a record's schema declares,
    outside the contract)."""
    if isinstance(value, IcebergType):
        return value
    if timestamps and type(value) is str and re.match(TIMESTAMP_RE, value):
        return TimestampType()
    return _INFERRED.get(type(value), StringType())


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


def money(d: Decimal, value: Any, column: DecimalType = MONEY_DECIMAL) -> Decimal:
    """``d`` as the ``column``'s type, else BadValue naming what does not fit (with the wider type when the same scale
    at a precision of at most 38 holds it; more decimal places are a scale change: never a promotion)."""
    try:
        if not d.is_finite():
            raise BadValue(f"{value!r} is not a finite number")
        q = d.quantize(Decimal(1).scaleb(-column.scale), context=_WIDE)
    except InvalidOperation:
        raise BadValue(f"{value!r} is not a decimal number") from None
    if q != d:
        raise BadValue(f"{value!r} has more than {column.scale} decimal places")
    digits = len(q.as_tuple().digits)
    if digits > column.precision:
        detail = f"{value!r} does not fit DECIMAL({column.precision},{column.scale})"
        if digits <= MAX_PRECISION:
            raise BadValue(detail, DecimalType(digits, column.scale))
        raise BadValue(detail)
    return q


def decode_decimal(
    value: Any, mode: str = DECIMAL_PRECISE, scale: int | None = MONEY_SCALE, column: DecimalType = MONEY_DECIMAL
) -> Decimal:
    """A decimal as Debezium writes it, as ``column``'s type: a JSON number, a decimal string, or (``precise`` mode,
    ``scale`` not None, base64 without a dot) a Connect ``Decimal`` of ``scale`` (the schema's, else the column's)."""
    t = type(value)
    if t is str:
        if scale is not None and mode == DECIMAL_PRECISE and "." not in value:
            unscaled = connect_decimal_unscaled(value)
            if unscaled is not None:
                return money(Decimal(unscaled).scaleb(-scale), value, column)
        try:
            d = Decimal(value)
        except InvalidOperation:
            hint = (
                "a decimal string or a Connect Decimal (base64)"
                if mode == DECIMAL_PRECISE
                else f"a decimal string (a Connect Decimal is read with {DECIMAL_MODE_SETTING}=precise)"
            )
            raise BadValue(f"{value!r} is not {hint}; check {DECIMAL_MODE_SETTING} (now {mode})") from None
        return money(d, value, column)
    if t is int or t is float:
        return money(Decimal(value if t is int else repr(value)), value, column)
    if t is dict and type(value.get("scale")) is int and type(value.get("value")) is str:
        # io.debezium.data.VariableScaleDecimal: a numeric column without a declared scale.
        unscaled = connect_decimal_unscaled(value["value"])
        if unscaled is not None:
            return money(Decimal(unscaled).scaleb(-value["scale"]), value, column)
    raise BadValue(f"expected a decimal string, a number or a Connect Decimal, got {type(value).__name__}")


def convert(kind: str, value: Any) -> Any:
    """A non-null JSON value as a column value of ``kind``; raises BadValue when it does not parse."""
    t = type(value)
    if kind == K_STRING:
        if t is str:
            return value
        raise BadValue(f"expected a string, got {t.__name__}")
    if kind in (K_LONG, K_INT):
        if t is int and -I64 <= value < I64:
            if kind == K_LONG or -I32 <= value < I32:
                return value
            raise BadValue(f"{value} does not fit a 32-bit integer", LongType())
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
    if kind == K_BOOL:
        if t is bool:
            return value
        raise BadValue(f"expected true or false, got {value!r}")
    if kind == K_TEXT_OR_JSON:
        return value if t is str else to_json_text(value)
    raise ValueError(f"unknown column kind {kind!r}")


Encodings = dict[str, tuple[str, int | None]]
# Connect schema (JsonConverter) and Avro types -> the Iceberg types a record declares, for promotions.
_CONNECT_TYPES: dict[str, IcebergType] = {"int32": IntegerType(), "int64": LongType(), "float32": FloatType()}
_CONNECT_TYPES |= {"float64": DoubleType(), "int": IntegerType(), "long": LongType(), "float": FloatType()}  # Avro's


def schema_encodings(schema: Any) -> tuple[Encodings, dict[str, IcebergType]] | None:
    """(per row column, what a JsonConverter schema block says: ``("decimal", scale)`` for a Connect ``Decimal``
    (None: sent as a string or number), ``("timestamp", micros per unit)`` (0: nanoseconds); the types it declares:
    a ``Decimal`` with ``connect.decimal.precision``, an unnamed integer or float); None if unusable."""
    try:
        row = next(f for f in schema["fields"] if f.get("field") == "after")
        out: Encodings = {}
        declared: dict[str, IcebergType] = {}
        for f in row["fields"]:
            name = f.get("name")
            if name == CONNECT_DECIMAL:
                params = f["parameters"]
                out[f["field"]] = ("decimal", int(params["scale"]))
                precision = int(params.get("connect.decimal.precision", 0))
                if 0 < precision <= MAX_PRECISION:  # else none, or wider than Iceberg's decimals: the values decide
                    declared[f["field"]] = DecimalType(precision, int(params["scale"]))
            elif name in TIMESTAMP_UNITS:
                out[f["field"]] = ("timestamp", TIMESTAMP_UNITS[name])
            elif f.get("type") != "bytes" and name != VARIABLE_SCALE_DECIMAL:
                out[f["field"]] = ("decimal", None)
                if name is None and f.get("type") in _CONNECT_TYPES:
                    declared[f["field"]] = _CONNECT_TYPES[f["type"]]
        return out, declared
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration):
        return None  # a schema block we cannot read: the contract and the setting decide


ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
# Connect (and Avro) types of a schema block -> those of a table outside the contract (the others: text, JSON text).
_EXTRA_TYPES: dict[str, IcebergType] = {"int": LongType(), "long": LongType(), "float": DoubleType()}
_EXTRA_TYPES |= {"double": DoubleType(), "boolean": BooleanType()}


def connect_types(schema: Any) -> dict[str, IcebergType]:
    """Per row column, the Iceberg type a JsonConverter schema block (or an Avro one rendered so) declares: integers
    bigint, a Connect ``Decimal`` of scale 2 DECIMAL(12,2) (any other: text), Debezium's timestamps timestamp."""
    out: dict[str, IcebergType] = {}
    try:
        for f in next(f for f in schema["fields"] if f.get("field") == "after")["fields"]:
            name, kind = f.get("name"), str(f.get("type")).rstrip("0123456789")  # int8..int64, float32/64: one kind
            stamp = name in TIMESTAMP_UNITS or name == ZONED_TIMESTAMP
            out[f["field"]] = TimestampType() if stamp else _EXTRA_TYPES.get(kind, StringType())
            if name == CONNECT_DECIMAL:
                out[f["field"]] = MONEY_DECIMAL if int(f["parameters"]["scale"]) == MONEY_SCALE else StringType()
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration):
        return {}  # a schema block we cannot read: the values decide
    return out


# -- event ids ------------------------------------------------------------------------------------------------
def event_id(topic: str, key: Any, lsn: int | None = None, op: str | None = None) -> str:
    """Hash of the event identity: (topic, key, lsn, op) for CDC, (topic, ping_id) for pings."""
    sep = IDENTITY_SEPARATOR
    text = f"{topic}{sep}{key}" if lsn is None else f"{topic}{sep}{key}{sep}{lsn}{sep}{op}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def event_ids(texts: pa.Array) -> pa.Array:
    """:func:`event_id` of each identity text (parts already joined by the separator), from copies of one hasher."""
    copy = _HASHER.copy
    out: list[str] = []
    append = out.append
    for t in texts.cast(pa.binary()).to_pylist():
        h = copy()
        h.update(t)
        append(h.hexdigest())
    return pa.array(out, pa.string())


# -- the same rules per Arrow column --------------------------------------------------------------------------
class Decline(Exception):
    """Values of an Arrow type or form the vectorised paths do not read: the line parser reads them."""


@dataclass(frozen=True)
class Encoding:
    """A column's Connect ``Decimal`` scale (None: never base64) and integer timestamp unit in micros (0: nanos)."""

    scale: int | None = MONEY_SCALE
    unit: int = 1


def _good(mask: Any) -> np.ndarray | None:
    """A per-value boolean Arrow mask as numpy, nulls taken; None when every value is taken."""
    filled = pc.fill_null(mask, True)
    if pc.all(filled, min_count=0).as_py():
        return None
    return np.asarray(filled.to_numpy(zero_copy_only=False), bool)


def _money_array(unscaled: np.ndarray, present: np.ndarray) -> pa.Array:
    """DECIMAL(12,2) of unscaled values (decimal128: 16-byte little-endian two's complement), null where absent."""
    words = np.empty((len(unscaled), 2), np.int64)
    words[:, 0] = unscaled
    words[:, 1] = unscaled >> 63
    valid = None if present.all() else pa.array(present, pa.bool_()).buffers()[1]
    return pa.Array.from_buffers(MONEY_TYPE, len(unscaled), [valid, pa.py_buffer(words.tobytes())])


def unscaled(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(unscaled int64, usable) of a binary array of two's-complement big-endian integers (usable: 1..8 bytes)."""
    n = len(values)
    arr = values.cast(pa.binary())
    lengths = np.asarray(pc.fill_null(pc.binary_length(arr), 0), np.int64)
    usable = (lengths >= 1) & (lengths <= 8)
    if not usable.any():
        return np.zeros(n, np.int64), usable
    lengths = np.where(usable, lengths, 0)
    _, offsets_buf, data_buf = arr.buffers()
    firsts = np.frombuffer(offsets_buf, np.int32, n + 1, arr.offset * 4).astype(np.int64)[:-1]
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    # Each value right-aligned in 8 bytes, sign-extended, then read as big-endian int64.
    rows_lengths = np.repeat(lengths, lengths)
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    negative = np.zeros(n, bool)
    negative[lengths > 0] = data[firsts[lengths > 0]] >= 0x80
    mat = np.ascontiguousarray(np.broadcast_to(np.where(negative, 0xFF, 0).astype(np.uint8)[:, None], (n, 8)))
    mat[np.repeat(np.arange(n), lengths), 8 - rows_lengths + within] = data[np.repeat(firsts, lengths) + within]
    return mat.view(">i8").reshape(n).astype(np.int64), usable


def _bytes_decimals(values: pa.Array, scale: int) -> tuple[pa.Array, np.ndarray | None]:
    if not -MONEY_SCALE - 16 <= scale <= MONEY_SCALE + 18:
        raise Decline  # a factor beyond int64: the line parser reads it
    u, usable = unscaled(values)
    if scale > MONEY_SCALE:
        d = 10 ** (scale - MONEY_SCALE)
        usable &= np.remainder(u, d) == 0
        u = u // d
    elif scale < MONEY_SCALE:
        m = 10 ** (MONEY_SCALE - scale)
        usable &= (u > -MAX_UNSCALED // m) & (u < MAX_UNSCALED // m)
        u = np.where(usable, u, 0) * m
    usable &= (u > -MAX_UNSCALED) & (u < MAX_UNSCALED)
    present = np.asarray(pc.is_valid(values), bool)
    good = ~present | usable
    return _money_array(np.where(usable, u, 0), present & usable), None if good.all() else good


def _text_decimals(values: pa.Array, scale: int | None) -> tuple[pa.Array, np.ndarray | None]:
    if _good(pc.match_substring_regex(values, MONEY_RE)) is None:  # every value canonical: Arrow casts them
        return values.cast(MONEY_TYPE), None
    # One Python step per value (far cheaper than parsing the line): the line parser's own decoding.
    n = len(values)
    out = np.zeros(n, np.int64)
    good = np.ones(n, bool)
    for i, v in enumerate(values.to_pylist()):
        if v is not None:
            try:
                out[i] = int(decode_decimal(v, DECIMAL_PRECISE, scale).scaleb(MONEY_SCALE))
            except BadValue:
                good[i] = False
    return _money_array(out, good & np.asarray(pc.is_valid(values), bool)), None if good.all() else good


def _masked(values: pa.Array, good: np.ndarray | None) -> pa.Array:
    """``values`` with those not ``good`` nulled."""
    return values if good is None else pc.if_else(pa.array(good), values, pa.nulls(len(values), values.type))


def _text_timestamps(values: pa.Array) -> tuple[pa.Array, np.ndarray | None]:
    good = _good(pc.match_substring_regex(values, TIMESTAMP_RE))
    try:
        # Every value taken ends in Z: parsed as UTC, its epoch micros are those of the naive time.
        return _masked(values, good).cast(TS_UTC).cast(pa.int64()), good
    except pa.ArrowInvalid:  # a canonical-looking impossible date (2026-02-30): the line parser says so
        dates = np.array([v is None or _is_date(v) for v in values.to_pylist()], bool)
        good = dates if good is None else good & dates
        return _masked(values, good).cast(TS_UTC).cast(pa.int64()), good


def _is_date(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def typed(kind: str, values: pa.Array, encoding: Encoding = Encoding()) -> tuple[pa.Array, np.ndarray | None]:
    """(values typed as :func:`convert` and the line parser type them, per value whether exactly so: None when every
    value is); the values not taken are null. Raises Decline for an Arrow type the kind is not read from."""
    t = values.type
    is_text = pa.types.is_string(t) or pa.types.is_large_string(t)
    is_bytes = pa.types.is_binary(t) or pa.types.is_large_binary(t)
    if pa.types.is_null(t):
        return values, None
    if kind in (K_STRING, K_TEXT_OR_JSON) and is_text:
        return values.cast(pa.string()), None
    if kind == K_TEXT_OR_JSON and is_bytes:  # as the JsonConverter writes bytes: base64 text
        texts = [None if v is None else base64.b64encode(v).decode("ascii") for v in values.to_pylist()]
        return pa.array(texts, pa.string()), None
    if kind in (K_LONG, K_INT) and pa.types.is_integer(t):  # an int column's values beyond 32 bits: promoted
        v = values.cast(pa.int64())
        good = None if kind == K_LONG else _good(pc.and_(pc.greater_equal(v, -I32), pc.less(v, I32)))
        return _masked(v, good), good
    if kind == K_BOOL and pa.types.is_boolean(t):
        return values, None
    if kind == K_DOUBLE and (pa.types.is_floating(t) or pa.types.is_integer(t)):
        v = values.cast(pa.float64())
        good = _good(pc.is_finite(v))
        return _masked(v, good), good
    if kind == K_DECIMAL and is_text:
        return _text_decimals(values, encoding.scale)
    if kind == K_DECIMAL and is_bytes and encoding.scale is not None:
        return _bytes_decimals(values, encoding.scale)
    if kind == K_TIMESTAMP and is_text:
        return _text_timestamps(values)
    if kind == K_TIMESTAMP and pa.types.is_timestamp(t):
        return values.cast(pa.timestamp("us", t.tz)).cast(pa.int64()), None
    if kind == K_TIMESTAMP and pa.types.is_integer(t) and encoding.unit:  # nanoseconds: floored by the line parser
        v = values.cast(pa.int64())
        return (v if encoding.unit == 1 else pc.multiply_checked(v, encoding.unit)), None
    raise Decline
