"""Pure encoders for the landing contract: values, row images, envelopes, file names, corruptions (f-strings on hot
paths: docs/internals/generator.md)."""

from __future__ import annotations

import base64
import binascii
import json
import random
from array import array
from collections.abc import Callable
from functools import cache, lru_cache
from typing import Any

from logistics_platform.lib import contract
from logistics_platform.lib.timekeys import from_epoch_micros

HOUR_US = 3_600_000_000
DEBEZIUM_VERSION = "2.7.3.Final"
_hour_prefix: dict[int, str] = {}


def hour_prefix(hour: int) -> str:
    """``YYYY-MM-DDTHH:`` of an epoch hour number (cached by ``iso``: timestamps are formatted by the million)."""
    return _hour_prefix.setdefault(hour, from_epoch_micros(hour * HOUR_US).strftime("%Y-%m-%dT%H:"))


# ``MM:SS.`` of every second of an hour: one lookup instead of two divmods and two formats per timestamp.
_MIN_SEC = [f"{s // 60:02d}:{s % 60:02d}." for s in range(3600)]


def iso(us: int) -> str:
    """ISO-8601 UTC text with microseconds, e.g. ``2026-11-02T10:15:30.123456Z``."""
    h, rem = divmod(us, HOUR_US)
    s, u = divmod(rem, 1_000_000)
    return f"{_hour_prefix.get(h) or hour_prefix(h)}{_MIN_SEC[s]}{u:06d}Z"


_ts_cache: dict[int, str] = {}


def ts_iso(us: int | None) -> str:
    """A timestamptz value as a JSON string literal (``time.precision.mode=adaptive`` ZonedTimestamp); memoised."""
    if us is None:
        return "null"
    text = _ts_cache.get(us)
    if text is None:
        if len(_ts_cache) > 200_000:
            _ts_cache.clear()
        text = _ts_cache[us] = f'"{iso(us)}"'
    return text


@cache  # amounts are a few thousand distinct values
def dec_str(cents: int | None) -> str:
    """A numeric(12,2) value as a JSON decimal string (``decimal.handling.mode=string``); memoised."""
    if cents is None:
        return "null"
    return f'"{"-" if cents < 0 else ""}{abs(cents) // 100}.{abs(cents) % 100:02d}"'


def dec_num(cents: int | None) -> str:
    """A numeric(12,2) value as a JSON number literal (the alternative encoding)."""
    return "null" if cents is None else dec_str(cents)[1:-1]


@cache
def dec_b64(cents: int | None) -> str:
    """A numeric(12,2) value as Kafka Connect's ``Decimal`` in JSON (``decimal.handling.mode=precise``): the unscaled
    value, two's-complement big-endian in the fewest bytes, base64 (``"EmI="``); memoised."""
    if cents is None:
        return "null"
    n = (cents + (cents < 0)).bit_length() // 8 + 1
    return '"' + base64.b64encode(cents.to_bytes(n, "big", signed=True)).decode("ascii") + '"'


def b64decode(text: str) -> bytes:
    """The bytes of a base64 text (strict: a Connect ``Decimal`` as JsonConverter writes it)."""
    return binascii.a2b_base64(text, strict_mode=True)


def jint(value: int | None) -> str:
    """A nullable integer as a JSON literal."""
    return "null" if value is None else str(value)


ts_epoch = jint  # a timestamptz value as a JSON integer of epoch microseconds (the alternative encoding)

ValueFn = Callable[[int | None], str]  # a timestamp or decimal encoder: ts_iso, ts_epoch, dec_str, dec_num, dec_b64


# ----------------------------------------------------------------------------------------------- row images
_ENCODERS: dict[str, Callable[[Any], str]] = {
    contract.TEXT_NAME: lambda v: "null" if v is None else f'"{v}"',
    contract.BIGINT_NAME: jint,
    contract.BOOLEAN_NAME: lambda v: "null" if v is None else ("true" if v else "false"),
    contract.DOUBLE_NAME: lambda v: "null" if v is None else repr(float(v)),
}
# Per CDC table, from the contract: (the field's JSON prefix, its type name, whether it is an added column), in order.
_ROWS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    t: tuple(
        (f'"{c.name}":', c.type.name, c in contract.SOURCES[t].added_columns)
        for c in contract.SOURCES[t].columns + contract.SOURCES[t].added_columns
    )
    for t in contract.CDC_TABLES
}


def row(table: str, values: list[Any], *, ts: ValueFn = ts_iso, dec: ValueFn = dec_str) -> str:
    """A CDC row image as JSON text: ``values`` in the contract's column order, then its added columns (None, or
    left out: the column does not exist yet); timestamps by ``ts`` and decimals by ``dec``."""
    parts = []
    for (key, kind, added), v in zip(_ROWS[table], values, strict=False):
        if not (added and v is None):
            enc = ts if kind == contract.TIMESTAMPTZ_NAME else dec if kind == contract.NUMERIC_NAME else _ENCODERS[kind]
            parts.append(key + enc(v))
    return "{" + ",".join(parts) + "}"


def ping_line(
    ping_id: str, courier_id: int, order_id: int | None, lat: float, lon: float, speed: float, us: int
) -> str:
    """A tracking ping as its JSON line (without the newline)."""
    return (
        f'{{"ping_id":"{ping_id}","courier_id":{courier_id},"order_id":{jint(order_id)},'
        f'"lat":{lat:.6f},"lon":{lon:.6f},"speed_kmh":{speed:.1f},"recorded_at":"{iso(us)}"}}'
    )


_UUID_OFFSETS = array("i", [0])


def uuid4_column(random_bytes: bytes) -> Any:
    """Arrow array of version-4 UUID texts, one per 16 random bytes (how: docs/internals/generator.md)."""
    import pyarrow as pa

    global _UUID_OFFSETS
    n = len(random_bytes) // 16
    hexed = random_bytes[: 16 * n].hex().encode("ascii")  # 32 digits per id
    out = bytearray(b"-" * (36 * n))
    src, dst = memoryview(hexed), memoryview(out)
    src4, dst4 = src.cast("I"), dst.cast("I")  # 4-byte units: 8 per id in, 9 out
    for s, d in ((0, 0), (1, 1), (5, 6), (6, 7), (7, 8)):  # digits 0-7 and 20-31
        dst4[d::9] = src4[s::8]
    for s, d in ((8, 9), (9, 10), (10, 11), (11, 12), (13, 15), (14, 16), (15, 17), (17, 20), (18, 21), (19, 22)):
        dst[d::36] = src[s::32]
    dst[14::36] = b"4" * n
    dst[19::36] = b"a" * n
    src4.release()
    dst4.release()
    if len(_UUID_OFFSETS) <= n:  # int32 offsets, every 36 bytes; a prefix serves any smaller call
        _UUID_OFFSETS = array("i", range(0, 36 * (2 * n + 1), 36))
    offsets = memoryview(_UUID_OFFSETS)[: n + 1]
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


@lru_cache(maxsize=64)
def second_prefixes(hour: int) -> Any:
    """Arrow array of ``YYYY-MM-DDTHH:MM:SS.`` for the 3600 seconds of an epoch hour (a few hours cached)."""
    import pyarrow as pa

    prefix = hour_prefix(hour)
    return pa.array([prefix + ms for ms in _MIN_SEC], pa.string())


# ----------------------------------------------------------------------------------------------- envelopes
# (a change event itself is written by the commit loop, cdc.ChangeStream.commit_hour)
def wrap_with_schema(schema_json: str, payload: str) -> str:
    """The same event as JsonConverter writes it with ``schemas.enable=true``."""
    return f'{{"schema":{schema_json},"payload":{payload}}}'


_TS_SCHEMA = {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "version": 1}
# A numeric column's schema with decimal.handling.mode=precise, field for field as the real JsonConverter writes it.
_DECIMAL_SCHEMA = {
    "type": "bytes",
    "optional": True,
    "name": "org.apache.kafka.connect.data.Decimal",
    "version": 1,
    "parameters": {"scale": str(contract.MONEY_SCALE), "connect.decimal.precision": str(contract.MONEY_PRECISION)},
}
# Connect schema type of the other contract types (decimal.handling.mode=string: numeric as string).
CONNECT_TYPES = {
    contract.TEXT_NAME: "string",
    contract.BIGINT_NAME: "int64",
    contract.BOOLEAN_NAME: "boolean",
    contract.DOUBLE_NAME: "double",
    contract.NUMERIC_NAME: "string",
}


def _connect_field(c: contract.SourceColumn, key: str, precise: bool) -> dict[str, Any]:
    if c.type.name == contract.TIMESTAMPTZ_NAME or (precise and c.type.is_decimal):
        typ: dict[str, Any] = _DECIMAL_SCHEMA if c.type.is_decimal else _TS_SCHEMA
    else:
        typ = {"type": CONNECT_TYPES[c.type.name], "optional": True}
    return {**typ, "optional": c.name != key, "field": c.name}


# Debezium's source block as the generator writes it, (field, Connect type, optional); and the transaction block.
# The Avro writer schema (generator/avro.py) derives its records from these too.
SOURCE_FIELDS: tuple[tuple[str, str, bool], ...] = (
    ("version", "string", False),
    ("connector", "string", False),
    ("name", "string", False),
    ("ts_ms", "int64", False),
    ("snapshot", "string", True),
    ("db", "string", False),
    ("sequence", "string", True),
    ("schema", "string", False),
    ("table", "string", False),
    ("txId", "int64", True),
    ("lsn", "int64", True),
    ("xmin", "int64", True),
)
TRANSACTION_FIELDS = (("id", "string"), ("total_order", "int64"), ("data_collection_order", "int64"))


def _struct(fields: list[dict[str, Any]], optional: bool, name: str, **rest: Any) -> dict[str, Any]:
    return {"type": "struct", "fields": fields, "optional": optional, "name": name, **rest}


def columns(table: str, extra: tuple[str, ...] = ()) -> list[contract.SourceColumn]:
    """The contract columns of a table, then its added columns named in ``extra``."""
    source = contract.SOURCES[table]
    return [*source.columns, *(source.column(c) for c in extra)]


def connect_schema(table: str, extra_columns: tuple[str, ...] = (), precise: bool = False) -> str:
    """The JsonConverter ``schema`` of a Debezium envelope for one table (compact JSON text); ``precise``: numeric
    columns as Connect ``Decimal`` (bytes, ``parameters.scale``) instead of strings."""
    fields = [_connect_field(c, contract.SOURCES[table].key, precise) for c in columns(table, extra_columns)]
    value = _struct(fields, True, f"oltp.public.{table}.Value")
    source_fields = [{"type": t, "optional": o, "field": n} for n, t, o in SOURCE_FIELDS]
    block_fields = [{"type": t, "optional": False, "field": n} for n, t in TRANSACTION_FIELDS]
    envelope = [
        {**value, "field": "before"},
        {**value, "field": "after"},
        _struct(source_fields, False, "io.debezium.connector.postgresql.Source", field="source"),
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
        _struct(block_fields, True, "event.block", version=1, field="transaction"),
    ]
    return json.dumps(_struct(envelope, False, f"oltp.public.{table}.Envelope", version=1), separators=(",", ":"))


# ----------------------------------------------------------------------------------------------- files
def partition_of(key: str | int, partitions: int) -> int:
    """Kafka partition of a record key: a stable hash (never Python's salted ``hash``)."""
    if isinstance(key, int):
        return key % partitions
    h = 0
    for ch in key.encode("utf-8"):
        h = (h * 31 + ch) & 0x7FFFFFFF
    return h % partitions


def landing_relpath(topic: str, hour_us: int, partition: int, start_offset: int, gz: bool) -> str:
    """``topics/<topic>/dt=YYYY-MM-DD/hr=HH/<topic>+<partition>+<start_offset:010d>.json[.gz]``."""
    h = from_epoch_micros(hour_us)
    return f"topics/{topic}/dt={h:%Y-%m-%d}/hr={h:%H}/{topic}+{partition}+{start_offset:010d}.json{'.gz' if gz else ''}"


# ----------------------------------------------------------------------------------------------- corruption
# Values that do not parse to the column type: (column, bad JSON value), per table.
BAD_VALUES: dict[str, tuple[tuple[str, Any], ...]] = {
    "tenants": (("updated_at", "2026-13-45T25:61:00Z"), ("updated_at", "yesterday")),
    "couriers": (("active", "yes"), ("updated_at", "not-a-timestamp")),
    "orders": (
        ("total_amount", "abc"),
        ("delivery_fee", "12,50"),
        ("created_at", "2026-02-30T10:00:00Z"),
        ("promised_at", "soon"),
        ("courier_id", "courier-7"),
    ),
    "payments": (("amount", "abc"), ("amount", "1.2.3"), ("created_at", "2026-11-02T25:00:00Z"), ("order_id", "x")),
    "tracking_pings": (
        ("lat", "north"),
        ("speed_kmh", "fast"),
        ("recorded_at", "2026-11-31T00:00:00Z"),
        ("courier_id", "c-12"),
    ),
}
CDC_REASONS = ("malformed_json", "invalid_op", "missing_key", "invalid_value", "invalid_envelope")
PLAIN_REASONS = ("malformed_json", "missing_key", "invalid_value")


def corrupt(line: str, table: str, key: str, kind: str, rng: random.Random, schema_json: str | None) -> tuple[str, str]:
    """A copy of a valid unwrapped envelope or ping line with exactly one defect, wrapped in ``schema_json`` when
    given: (new line, expected quarantine reason, with ``:<column>`` for values)."""
    # the defect's variant (invalid_value picks a bad value instead)
    variant = 0 if kind == "invalid_value" else rng.randrange(4 if kind == "invalid_envelope" else 3)
    if kind == "malformed_json":
        if variant == 0:  # the sink cut the line (disk full, partial upload)
            return line[: rng.randrange(1, len(line) - 1)], kind
        if variant == 1:  # a Latin-1 byte (0xE9, "é") inside a string: not UTF-8
            i = line.find('":"') + 3
            return line[:i] + "\udce9" + line[i:], kind
        # a producer wrote Python's repr of the object instead of JSON
        return repr(json.loads(line)), kind
    obj = json.loads(line)
    row = obj.get("after") if "op" in obj else obj
    reason = kind
    if kind == "invalid_op":
        if variant == 0:
            del obj["op"]
        else:
            obj["op"] = "x" if variant == 1 else "U"
    elif kind == "missing_key":
        if variant == 0:
            del row[key]
        else:  # null, or the wrong type: a text key as a number, a bigint key as text
            row[key] = None if variant == 1 else 12345 if isinstance(row[key], str) else f"id-{row[key]}"
    elif kind == "invalid_value":
        column, bad = rng.choice(BAD_VALUES[table])
        row[column] = bad
        reason = f"invalid_value:{column}"
    elif kind == "invalid_envelope":
        if variant == 0:
            del obj["after"]
        elif variant == 1:
            obj["after"] = None
        else:
            del obj["source"]["lsn" if variant == 2 else "ts_ms"]
    else:
        raise ValueError(f"unknown corruption {kind!r}")
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return (wrap_with_schema(schema_json, text) if schema_json else text), reason
