"""Pure encoders for the landing contract (docs/contract/sources.md): timestamps, decimals, row images, Debezium
envelopes, the JsonConverter schema wrapper, landing file names, and the deliberate corruptions of the quarantine table.

Hot paths build JSON text with f-strings instead of ``json.dumps``: every generated value is ASCII-safe or
plain UTF-8 text without quotes or backslashes, so the result is valid JSON by construction (the tests parse
every line to prove it). The rare corrupted lines go through ``json`` because their shape varies.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import random
from array import array
from collections.abc import Callable
from typing import Any

from logistics_platform.lib import contract
from logistics_platform.lib.timekeys import from_epoch_micros

HOUR_US = 3_600_000_000
DEBEZIUM_VERSION = "2.7.3.Final"

_hour_prefix: dict[int, str] = {}


def hour_prefix(hour: int) -> str:
    """``YYYY-MM-DDTHH:`` of an epoch hour number (cached: timestamps are formatted by the million)."""
    prefix = _hour_prefix.get(hour)
    if prefix is None:
        prefix = from_epoch_micros(hour * HOUR_US).strftime("%Y-%m-%dT%H:")
        _hour_prefix[hour] = prefix
    return prefix


# ``MM:SS.`` of every second of an hour: one lookup instead of two divmods and two formats per timestamp.
_MIN_SEC = [f"{s // 60:02d}:{s % 60:02d}." for s in range(3600)]


def iso(us: int) -> str:
    """ISO-8601 UTC text with microseconds, e.g. ``2026-11-02T10:15:30.123456Z``."""
    h, rem = divmod(us, HOUR_US)
    s, u = divmod(rem, 1_000_000)
    return f"{_hour_prefix.get(h) or hour_prefix(h)}{_MIN_SEC[s]}{u:06d}Z"


_ts_cache: dict[int, str] = {}


def ts_iso(us: int | None) -> str:
    """A timestamptz value as a JSON string literal (``time.precision.mode=adaptive`` ZonedTimestamp).

    Memoised: an order's created_at/promised_at are rendered again on every one of its changes.
    """
    if us is None:
        return "null"
    text = _ts_cache.get(us)
    if text is None:
        if len(_ts_cache) > 200_000:
            _ts_cache.clear()
        text = _ts_cache[us] = f'"{iso(us)}"'
    return text


def ts_epoch(us: int | None) -> str:
    """A timestamptz value as a JSON integer of epoch microseconds (the alternative encoding)."""
    return "null" if us is None else str(us)


_dec_cache: dict[int, str] = {}


def dec_str(cents: int | None) -> str:
    """A numeric(12,2) value as a JSON decimal string (``decimal.handling.mode=string``); memoised."""
    if cents is None:
        return "null"
    text = _dec_cache.get(cents)
    if text is None:
        sign = "-" if cents < 0 else ""
        c = -cents if cents < 0 else cents
        text = f'"{sign}{c // 100}.{c % 100:02d}"'
        if len(_dec_cache) < 100_000:
            _dec_cache[cents] = text
    return text


def dec_num(cents: int | None) -> str:
    """A numeric(12,2) value as a JSON number literal (the alternative encoding)."""
    return "null" if cents is None else dec_str(cents)[1:-1]


_b64_cache: dict[int, str] = {}


def dec_b64(cents: int | None) -> str:
    """A numeric(12,2) value as Kafka Connect's ``Decimal`` in JSON (``decimal.handling.mode=precise``, Debezium's
    default): the unscaled value, two's-complement big-endian in the fewest bytes, base64 (``"EmI="``); memoised."""
    if cents is None:
        return "null"
    text = _b64_cache.get(cents)
    if text is None:
        n = (cents + (cents < 0)).bit_length() // 8 + 1
        text = '"' + base64.b64encode(cents.to_bytes(n, "big", signed=True)).decode("ascii") + '"'
        if len(_b64_cache) < 100_000:
            _b64_cache[cents] = text
    return text


def b64decode(text: str) -> bytes:
    """The bytes of a base64 text (strict: a Connect ``Decimal`` as JsonConverter writes it)."""
    return binascii.a2b_base64(text, strict_mode=True)


def jint(value: int | None) -> str:
    """A nullable integer as a JSON literal."""
    return "null" if value is None else str(value)


TsFn = Callable[[int | None], str]
DecFn = Callable[[int | None], str]


# ----------------------------------------------------------------------------------------------- row images
def _text(value: Any) -> str:
    return "null" if value is None else f'"{value}"'


def _bool(value: Any) -> str:
    return "null" if value is None else ("true" if value else "false")


_ENCODERS: dict[str, Callable[[Any], str]] = {
    contract.TEXT_NAME: _text,
    contract.BIGINT_NAME: jint,
    contract.BOOLEAN_NAME: _bool,
}
# Per CDC table, from the contract: (the field's JSON prefix, its type name, whether it is an added column), in order.
_ROWS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    t: tuple(
        (f'"{c.name}":', c.type.name, c in contract.SOURCES[t].added_columns)
        for c in contract.SOURCES[t].columns + contract.SOURCES[t].added_columns
    )
    for t in contract.CDC_TABLES
}


def row(table: str, values: list[Any], *, ts: TsFn = ts_iso, dec: DecFn = dec_str) -> str:
    """A CDC row image as JSON text: ``values`` in the contract's column order, then its added columns (None, or
    left out: the column does not exist yet); timestamps by ``ts`` and decimals by ``dec``."""
    parts = []
    for (key, kind, added), v in zip(_ROWS[table], values, strict=False):
        if added and v is None:
            continue
        if kind == contract.TIMESTAMPTZ_NAME:
            parts.append(key + ts(v))
        elif kind == contract.NUMERIC_NAME:
            parts.append(key + dec(v))
        else:
            parts.append(key + _ENCODERS[kind](v))
    return "{" + ",".join(parts) + "}"


def ping_line(
    ping_id: str, courier_id: int, order_id: int | None, lat: float, lon: float, speed: float, us: int
) -> str:
    """A tracking ping as its JSON line (without the newline)."""
    return (
        f'{{"ping_id":"{ping_id}","courier_id":{courier_id},"order_id":{jint(order_id)},'
        f'"lat":{lat:.6f},"lon":{lon:.6f},"speed_kmh":{speed:.1f},"recorded_at":"{iso(us)}"}}'
    )


def uuid4_text(bits: int) -> str:
    """A version-4 UUID string from 128 random bits (deterministic given the bits)."""
    h = f"{bits:032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


_UUID_OFFSETS = array("i", [0])


def uuid4_column(random_bytes: bytes) -> Any:
    """Version-4 UUID strings (Arrow array), one per 16 bytes of ``random_bytes``.

    The bytes are hex-encoded in one C call and the digits moved into the 8-4-4-4-12 layout by strided slice
    copies (whole 4-byte units where source and target line up): a few copies of n elements instead of a
    per-id string join. The version digit is ``4`` and the variant digit ``a``, as in :func:`uuid4_text`.
    """
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


_SECOND_TABLES: dict[int, Any] = {}


def second_prefixes(hour: int) -> Any:
    """Arrow array of ``YYYY-MM-DDTHH:MM:SS.`` for the 3600 seconds of an epoch hour (a few hours cached)."""
    import pyarrow as pa

    table = _SECOND_TABLES.get(hour)
    if table is None:
        if len(_SECOND_TABLES) >= 64:
            _SECOND_TABLES.clear()
        prefix = hour_prefix(hour)
        table = _SECOND_TABLES[hour] = pa.array([prefix + ms for ms in _MIN_SEC], pa.string())
    return table


# ----------------------------------------------------------------------------------------------- envelopes
def envelope(
    table: str,
    op: str,
    before: str,
    after: str,
    commit_ms: int,
    lsn: int,
    prev_lsn: int,
    tx_id: int,
    connector_ms: int,
    snapshot: str = "false",
) -> str:
    """A Debezium change event as Kafka Connect's JsonConverter writes it with ``schemas.enable=false``."""
    return (
        f'{{"before":{before},"after":{after},"source":{{"version":"{DEBEZIUM_VERSION}","connector":"postgresql",'
        f'"name":"oltp","ts_ms":{commit_ms},"snapshot":"{snapshot}","db":"oltp",'
        f'"sequence":"[\\"{prev_lsn}\\",\\"{lsn}\\"]","schema":"public","table":"{table}","txId":{tx_id},'
        f'"lsn":{lsn},"xmin":null}},"op":"{op}","ts_ms":{connector_ms},"transaction":null}}'
    )


def wrap_with_schema(schema_json: str, payload: str) -> str:
    """The same event as JsonConverter writes it with ``schemas.enable=true``."""
    return f'{{"schema":{schema_json},"payload":{payload}}}'


_TS_SCHEMA = {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "version": 1}
# Connect schema type of each contract type (decimal.handling.mode=string -> string).
_CONNECT_TYPES: dict[str, Any] = {
    contract.TEXT_NAME: "string",
    contract.BIGINT_NAME: "int64",
    contract.BOOLEAN_NAME: "boolean",
    contract.DOUBLE_NAME: "double",
    contract.NUMERIC_NAME: "string",
    contract.TIMESTAMPTZ_NAME: _TS_SCHEMA,
}
_COLUMN_TYPES: dict[str, list[tuple[str, Any]]] = {
    t: [(c.name, _CONNECT_TYPES[c.type.name]) for c in contract.SOURCES[t].columns] for t in contract.CDC_TABLES
}
KEYS = {t: contract.SOURCES[t].key for t in contract.CDC_TABLES}


# A numeric column's schema with decimal.handling.mode=precise, field for field as the real JsonConverter writes it.
_DECIMAL_SCHEMA = {
    "type": "bytes",
    "optional": True,
    "name": "org.apache.kafka.connect.data.Decimal",
    "version": 1,
    "parameters": {"scale": str(contract.MONEY_SCALE), "connect.decimal.precision": str(contract.MONEY_PRECISION)},
}
DECIMAL_COLUMNS = frozenset(
    c.name
    for t in contract.CDC_TABLES
    for c in contract.SOURCES[t].columns + contract.SOURCES[t].added_columns
    if c.type.is_decimal
)


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


def connect_schema(table: str, extra_columns: tuple[str, ...] = (), precise: bool = False) -> str:
    """The JsonConverter ``schema`` of a Debezium envelope for one table (compact JSON text); ``precise``: numeric
    columns as Connect ``Decimal`` (bytes, ``parameters.scale``) instead of strings."""
    source = contract.SOURCES[table]
    columns = list(_COLUMN_TYPES[table]) + [(c, _CONNECT_TYPES[source.column(c).type.name]) for c in extra_columns]
    key = KEYS[table]
    fields = []
    for name, typ in columns:
        if precise and name in DECIMAL_COLUMNS:
            typ = _DECIMAL_SCHEMA
        f: dict[str, Any] = dict(typ) if isinstance(typ, dict) else {"type": typ, "optional": name != key}
        if name == key:
            f["optional"] = False
        f["field"] = name
        fields.append(f)
    value = {"type": "struct", "fields": fields, "optional": True, "name": f"oltp.public.{table}.Value"}
    schema = {
        "type": "struct",
        "fields": [
            {**value, "field": "before"},
            {**value, "field": "after"},
            {
                "type": "struct",
                "fields": [{"type": t, "optional": o, "field": n} for n, t, o in SOURCE_FIELDS],
                "optional": False,
                "name": "io.debezium.connector.postgresql.Source",
                "field": "source",
            },
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {
                "type": "struct",
                "fields": [{"type": t, "optional": False, "field": n} for n, t in TRANSACTION_FIELDS],
                "optional": True,
                "name": "event.block",
                "version": 1,
                "field": "transaction",
            },
        ],
        "optional": False,
        "name": f"oltp.public.{table}.Envelope",
        "version": 1,
    }
    return json.dumps(schema, separators=(",", ":"))


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
    ext = ".json.gz" if gz else ".json"
    return f"topics/{topic}/dt={h:%Y-%m-%d}/hr={h:%H}/{topic}+{partition}+{start_offset:010d}{ext}"


def encode_lines(lines: list[str], gz: bool) -> bytes:
    """File content: one line each, newline-terminated; lone surrogates become the raw (non-UTF-8) bytes.

    gzip output is reproducible: mtime 0 and no file name in the header.
    """
    data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
    return gzip.compress(data, compresslevel=1, mtime=0) if gz else data


# ----------------------------------------------------------------------------------------------- corruption
def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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
    """A broken copy of a valid line: (new line, expected quarantine reason, with ``:<column>`` for values).

    ``line`` is a valid unwrapped envelope (CDC) or ping object; ``schema_json`` wraps the result in the
    ``schema``/``payload`` form when given. Each corruption has exactly one defect so its reason is unambiguous.
    """
    if kind == "malformed_json":
        variant = rng.randrange(3)
        if variant == 0:  # the sink cut the line (disk full, partial upload)
            return line[: rng.randrange(1, len(line) - 1)], kind
        if variant == 1:  # a Latin-1 byte (0xE9, "é") inside a string: not UTF-8
            i = line.find('":"') + 3
            return line[:i] + "\udce9" + line[i:], kind
        # a producer wrote Python's repr of the object instead of JSON
        return repr(json.loads(line)), kind
    obj = json.loads(line)
    row = obj.get("after") if "op" in obj else obj
    if kind == "invalid_op":
        variant = rng.randrange(3)
        if variant == 0:
            del obj["op"]
        else:
            obj["op"] = "x" if variant == 1 else "U"
        reason = kind
    elif kind == "missing_key":
        variant = rng.randrange(3)
        if variant == 0:
            del row[key]
        elif variant == 1:
            row[key] = None
        else:  # wrong type: text key as a number, bigint key as text
            row[key] = 12345 if isinstance(row[key], str) else f"id-{row[key]}"
        reason = kind
    elif kind == "invalid_value":
        column, bad = rng.choice(BAD_VALUES[table])
        row[column] = bad
        reason = f"invalid_value:{column}"
    elif kind == "invalid_envelope":
        variant = rng.randrange(4)
        if variant == 0:
            del obj["after"]
        elif variant == 1:
            obj["after"] = None
        elif variant == 2:
            del obj["source"]["lsn"]
        else:
            del obj["source"]["ts_ms"]
        reason = kind
    else:
        raise ValueError(f"unknown corruption {kind!r}")
    text = _dumps(obj)
    return (wrap_with_schema(schema_json, text) if schema_json else text), reason
