"""Avro landing files as Confluent's AvroConverter and a Kafka Connect sink's AvroFormat write them: the writer schema
of a table's Debezium envelope (the real connector's shape: docs/contract/sources.md section 7), the binary encoding
of an envelope, and the object container file (header with ``avro.schema``/``avro.codec``, one block, sync marker).

Written here rather than with an Avro library: the encoding is small (zigzag varints, length-prefixed bytes and
strings, union branch indices) and the generator must be byte-for-byte reproducible.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from decimal import Decimal
from typing import Any

from logistics_platform.generator import encode as E

MAGIC = b"Obj\x01"
CODECS = ("null", "deflate")
_TS = {"type": "string", "connect.version": 1, "connect.name": "io.debezium.time.ZonedTimestamp"}
_EPOCH_DEFAULT = "1970-01-01T00:00:00.000000Z"
# updated_at has a DEFAULT in the OLTP schema: the registry schema carries it (as the real connector's does)
_TS_DEFAULTED = {**_TS, "connect.default": _EPOCH_DEFAULT}
_DECIMAL = {
    "type": "bytes",
    "scale": 2,
    "precision": 12,
    "connect.version": 1,
    "connect.parameters": {"scale": "2", "connect.decimal.precision": "12"},
    "connect.name": "org.apache.kafka.connect.data.Decimal",
    "logicalType": "decimal",
}
# Column kinds: string, long, boolean, decimal, ts (timestamptz); nullable columns are ["null", type].
_COLUMNS: dict[str, list[tuple[str, str, bool]]] = {
    "tenants": [
        ("tenant_id", "string", False),
        ("name", "string", False),
        ("tier", "string", False),
        ("region", "string", False),
        ("updated_at", "ts", False),
    ],
    "couriers": [
        ("courier_id", "long", False),
        ("name", "string", False),
        ("region", "string", False),
        ("vehicle", "string", False),
        ("active", "boolean", False),
        ("updated_at", "ts", False),
    ],
    "orders": [
        ("order_id", "long", False),
        ("tenant_id", "string", False),
        ("courier_id", "long", True),
        ("region", "string", False),
        ("status", "string", False),
        ("total_amount", "decimal", False),
        ("delivery_fee", "decimal", False),
        ("created_at", "ts", False),
        ("promised_at", "ts", False),
        ("delivered_at", "ts", True),
        ("updated_at", "ts", False),
    ],
    "payments": [
        ("payment_id", "long", False),
        ("order_id", "long", False),
        ("amount", "decimal", False),
        ("method", "string", False),
        ("status", "string", False),
        ("created_at", "ts", False),
        ("updated_at", "ts", False),
    ],
}
# A column added part way (ALTER TABLE ... ADD COLUMN, nullable): the registry registers a new schema version.
ADDED_COLUMNS = {"tip_amount": "decimal"}
# source fields the generator writes (encode.envelope), with the real connector's types
_SOURCE: list[tuple[str, Any]] = [
    ("version", "string"),
    ("connector", "string"),
    ("name", "string"),
    ("ts_ms", "long"),
    (
        "snapshot",
        [
            {
                "type": "string",
                "connect.version": 1,
                "connect.parameters": {
                    "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
                },
                "connect.default": "false",
                "connect.name": "io.debezium.data.Enum",
            },
            "null",
        ],
    ),
    ("db", "string"),
    ("sequence", ["null", "string"]),
    ("schema", "string"),
    ("table", "string"),
    ("txId", ["null", "long"]),
    ("lsn", ["null", "long"]),
    ("xmin", ["null", "long"]),
]
# what a column missing from a key-only before image is filled with (Debezium's placeholder of its type)
_PLACEHOLDER = {"string": "", "long": 0, "boolean": False, "decimal": 0, "ts": "1970-01-01T00:00:00Z"}


def columns(table: str, extra: tuple[str, ...] = ()) -> list[tuple[str, str, bool]]:
    """(name, kind, nullable) of a table's columns, then the added columns ``extra`` (nullable)."""
    return [*_COLUMNS[table], *((c, ADDED_COLUMNS[c], True) for c in extra)]


def _column_type(name: str, kind: str, nullable: bool) -> dict[str, Any]:
    if kind == "decimal":
        typ: Any = dict(_DECIMAL)
    elif kind == "ts":
        typ = dict(_TS_DEFAULTED if name == "updated_at" else _TS)
    else:
        typ = kind
    field: dict[str, Any] = {"name": name, "type": ["null", typ] if nullable else typ}
    if nullable:
        field["default"] = None
    elif name == "updated_at":
        field["default"] = _EPOCH_DEFAULT
    return field


def writer_schema(table: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The registry's writer schema of ``oltp.public.<table>`` (record ``Envelope`` in namespace ``<topic>``): the
    real connector's, for the fields the generator writes (its ``source`` has no ``ts_us``/``ts_ns``/``origin``)."""
    topic = f"oltp.public.{table}"
    value = {
        "type": "record",
        "name": "Value",
        "fields": [_column_type(n, k, o) for n, k, o in columns(table, extra)],
        "connect.name": f"{topic}.Value",
    }
    source = {
        "type": "record",
        "name": "Source",
        "namespace": "io.debezium.connector.postgresql",
        "fields": [
            {"name": n, "type": t, **({"default": "false"} if n == "snapshot" else {})}
            | ({"default": None} if isinstance(t, list) and t[0] == "null" else {})
            for n, t in _SOURCE
        ],
        "connect.version": 1,
        "connect.name": "io.debezium.connector.postgresql.Source",
    }
    block = {
        "type": "record",
        "name": "block",
        "namespace": "event",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "total_order", "type": "long"},
            {"name": "data_collection_order", "type": "long"},
        ],
        "connect.version": 1,
        "connect.name": "event.block",
    }
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": topic,
        "fields": [
            {"name": "before", "type": ["null", value], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "source", "type": source},
            {"name": "transaction", "type": ["null", block], "default": None},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
        ],
        "connect.version": 2,
        "connect.name": f"{topic}.Envelope",
    }


# ----------------------------------------------------------------------------------------------- binary encoding
def _long(n: int, out: bytearray) -> None:
    """An Avro ``int``/``long``: zigzag, then base-128 varint, little end first."""
    z = (n << 1) ^ (n >> 63)
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def long_bytes(n: int) -> bytes:
    """The Avro encoding of one ``long``."""
    out = bytearray()
    _long(n, out)
    return bytes(out)


def _bytes(b: bytes, out: bytearray) -> None:
    _long(len(b), out)
    out += b


def unscaled_bytes(unscaled: int) -> bytes:
    """A decimal's unscaled value as Avro's ``decimal`` stores it: two's-complement big-endian, fewest bytes."""
    n = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
    return unscaled.to_bytes(n, "big", signed=True)


def cents(value: Any) -> int:
    """The unscaled (scale 2) value of a decimal as a JSON line carries it: ``"129.90"``, a number, or base64."""
    if isinstance(value, str):
        if "." in value:
            return int(Decimal(value).scaleb(2))
        return int.from_bytes(E.b64decode(value), "big", signed=True)
    return int(Decimal(str(value)).scaleb(2))


def timestamp(value: Any) -> str:
    """A timestamptz as ZonedTimestamp text: ISO-8601 as it is, or epoch microseconds turned into it."""
    return value if isinstance(value, str) else E.iso(int(value))


def _value(row: dict[str, Any], cols: list[tuple[str, str, bool]], out: bytearray) -> None:
    for name, kind, nullable in cols:
        v: Any = row.get(name)
        if v is None and not nullable:
            v = _PLACEHOLDER[kind]  # a key-only before image: every other column is its type's placeholder
        if nullable:
            if v is None:
                out.append(0)  # union branch 0: null
                continue
            out.append(2)  # union branch 1
        if kind == "string":
            _bytes(v.encode("utf-8"), out)
        elif kind == "long":
            _long(int(v), out)
        elif kind == "boolean":
            out.append(1 if v else 0)
        elif kind == "decimal":
            _bytes(unscaled_bytes(cents(v)), out)
        else:
            _bytes(timestamp(v).encode("utf-8"), out)


def _optional_long(v: Any, out: bytearray) -> None:
    if v is None:
        out.append(0)
    else:
        out.append(2)
        _long(int(v), out)


def _optional_string(v: Any, out: bytearray) -> None:
    if v is None:
        out.append(0)
    else:
        out.append(2)
        _bytes(str(v).encode("utf-8"), out)


def datum(envelope: dict[str, Any], cols: list[tuple[str, str, bool]]) -> bytes:
    """The Avro binary encoding of a Debezium envelope (as parsed from its JSON line) under ``writer_schema``."""
    out = bytearray()
    for image in (envelope.get("before"), envelope.get("after")):
        if image is None:
            out.append(0)
        else:
            out.append(2)
            _value(image, cols, out)
    s = envelope["source"]
    for name in ("version", "connector", "name"):
        _bytes(s[name].encode("utf-8"), out)
    _long(s["ts_ms"], out)
    snapshot = s.get("snapshot")
    if snapshot is None:
        out.append(2)  # ["string", "null"]: branch 1 is null
    else:
        out.append(0)
        _bytes(str(snapshot).encode("utf-8"), out)
    _bytes(s["db"].encode("utf-8"), out)
    _optional_string(s.get("sequence"), out)
    _bytes(s["schema"].encode("utf-8"), out)
    _bytes(s["table"].encode("utf-8"), out)
    for name in ("txId", "lsn", "xmin"):
        _optional_long(s.get(name), out)
    out.append(0)  # transaction: null (transaction metadata is off by default)
    _bytes(envelope["op"].encode("utf-8"), out)
    _optional_long(envelope.get("ts_ms"), out)
    return bytes(out)


def sync_marker(name: str) -> bytes:
    """A container's 16-byte sync marker, derived from the file name: random-looking, and reproducible."""
    return hashlib.blake2b(name.encode("utf-8"), digest_size=16).digest()


def container(schema: str, datums: list[bytes], codec: str, sync: bytes) -> bytes:
    """An Avro object container file: header (``avro.schema``, ``avro.codec``, sync), then one block of ``datums``.

    ``codec`` null or deflate (raw deflate, no zlib header, as the Avro spec has it).
    """
    if codec not in CODECS:
        raise ValueError(f"avro codec {codec!r}: expected one of {', '.join(CODECS)}")
    out = bytearray(MAGIC)
    meta = {"avro.schema": schema.encode("utf-8"), "avro.codec": codec.encode("ascii")}
    _long(len(meta), out)
    for k, v in meta.items():
        _bytes(k.encode("ascii"), out)
        _bytes(v, out)
    _long(0, out)
    out += sync
    body = b"".join(datums)
    if codec == "deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        body = c.compress(body) + c.flush()
    _long(len(datums), out)
    _bytes(body, out)
    out += sync
    return bytes(out)


def schema_text(table: str, extra: tuple[str, ...] = ()) -> str:
    """The writer schema as the container header holds it (compact JSON)."""
    return json.dumps(writer_schema(table, extra), separators=(",", ":"))
