"""Avro landing files as an AvroConverter and a sink's AvroFormat write them: the envelope's writer schema (the real
connector's shape: docs/contract/sources.md section 7), records, container files (docs/internals/generator.md)."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from functools import lru_cache
from io import BytesIO
from typing import Any

import fastavro

from logistics_platform.generator import encode as E
from logistics_platform.generator.encode import columns
from logistics_platform.generator.model import Piece, Record
from logistics_platform.lib import contract

CODECS = ("null", "deflate")
_TS = {"type": "string", "connect.version": 1, "connect.name": "io.debezium.time.ZonedTimestamp"}
_EPOCH_DEFAULT = "1970-01-01T00:00:00.000000Z"
# what a column missing from a key-only before image is filled with (Debezium's placeholder of its type)
_PLACEHOLDER: dict[str, Any] = {
    contract.TEXT_NAME: "",
    contract.BIGINT_NAME: 0,
    contract.BOOLEAN_NAME: False,
    contract.DOUBLE_NAME: 0.0,
    contract.NUMERIC_NAME: 0,
    contract.TIMESTAMPTZ_NAME: "1970-01-01T00:00:00Z",
}
# Debezium's snapshot field: an enum of strings, its null branch second, "false" by default (the real connector's)
_SNAPSHOT = {
    "type": "string",
    "connect.version": 1,
    "connect.parameters": {
        "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
    },
    "connect.default": "false",
    "connect.name": "io.debezium.data.Enum",
}
_AVRO_OF_CONNECT = {"string": "string", "int64": "long", "boolean": "boolean", "double": "double"}


def _source_field(name: str, connect_type: str, optional: bool) -> dict[str, Any]:
    typ = _AVRO_OF_CONNECT[connect_type]
    if name == "snapshot":
        return {"name": name, "type": [_SNAPSHOT, "null"], "default": "false"}
    return {"name": name, "type": ["null", typ], "default": None} if optional else {"name": name, "type": typ}


def _field(c: contract.SourceColumn) -> dict[str, Any]:
    t = c.type
    typ: Any = _AVRO_OF_CONNECT.get(E.CONNECT_TYPES.get(t.name, ""))  # decimals and timestamps: below
    if t.is_decimal:
        typ = {
            "type": "bytes",
            "scale": t.scale,
            "precision": t.precision,
            "connect.version": 1,
            "connect.parameters": {"scale": str(t.scale), "connect.decimal.precision": str(t.precision)},
            "connect.name": "org.apache.kafka.connect.data.Decimal",
            "logicalType": "decimal",
        }
    elif t.name == contract.TIMESTAMPTZ_NAME:
        # a column with a DEFAULT in the OLTP schema (updated_at): the registry schema carries it, as the real one's
        typ = {**_TS, "connect.default": _EPOCH_DEFAULT} if c.default is not None else dict(_TS)
    if c.nullable:
        return {"name": c.name, "type": ["null", typ], "default": None}
    if isinstance(typ, dict) and "connect.default" in typ:
        return {"name": c.name, "type": typ, "default": typ["connect.default"]}
    return {"name": c.name, "type": typ}


def _record(name: str, namespace: str | None, fields: list[Any], version: int | None, connect: str) -> dict[str, Any]:
    """An Avro record schema with Connect's ``connect.version`` and ``connect.name`` (None: left out)."""
    rec = {"type": "record", "name": name, "namespace": namespace, "fields": fields, "connect.version": version}
    return {**{k: v for k, v in rec.items() if v is not None}, "connect.name": connect}


def writer_schema(table: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The registry's writer schema of ``oltp.public.<table>`` (record ``Envelope`` in namespace ``<topic>``): the
    real connector's, for the fields the generator writes (its ``source`` has no ``ts_us``/``ts_ns``/``origin``)."""
    topic = contract.SOURCES[table].topic
    value = _record("Value", None, [_field(c) for c in columns(table, extra)], None, f"{topic}.Value")
    debezium = "io.debezium.connector.postgresql"
    source = _record("Source", debezium, [_source_field(*f) for f in E.SOURCE_FIELDS], 1, f"{debezium}.Source")
    block = [{"name": n, "type": _AVRO_OF_CONNECT[t]} for n, t in E.TRANSACTION_FIELDS]
    fields = [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": source},
        {"name": "transaction", "type": ["null", _record("block", "event", block, 1, "event.block")], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ]
    return _record("Envelope", topic, fields, 2, f"{topic}.Envelope")


def _decimal(value: Any, scale: int) -> Decimal:
    """A decimal as a JSON line carries it (``"129.90"``, a number, or a Connect Decimal's base64) as a Decimal."""
    if isinstance(value, str) and "." not in value:
        return Decimal(int.from_bytes(E.b64decode(value), "big", signed=True)).scaleb(-scale)
    return Decimal(value if isinstance(value, str) else str(value))


def _value(c: contract.SourceColumn, v: Any) -> Any:
    """A row image's value as fastavro writes it for the column's Avro type (None stays None)."""
    if v is None and c.nullable:
        return None
    name = c.type.name
    v = _PLACEHOLDER[name] if v is None else v  # a key-only before image: the other columns are placeholders
    if name == contract.NUMERIC_NAME:
        return _decimal(v, c.type.scale or 0)
    if name == contract.TIMESTAMPTZ_NAME:
        return v if isinstance(v, str) else E.iso(int(v))  # ZonedTimestamp text, or epoch microseconds made into it
    return v


def record(envelope: dict[str, Any], cols: list[contract.SourceColumn]) -> dict[str, Any]:
    """The Avro record of a Debezium envelope (as parsed from its JSON line) under ``writer_schema``."""
    images = [
        None if image is None else {c.name: _value(c, image.get(c.name)) for c in cols}
        for image in (envelope.get("before"), envelope.get("after"))
    ]
    return {
        "before": images[0],
        "after": images[1],
        "source": envelope["source"],
        "transaction": None,  # transaction metadata is off by default
        "op": envelope["op"],
        "ts_ms": envelope.get("ts_ms"),
    }


def sync_marker(name: str) -> bytes:
    """A container's 16-byte sync marker, derived from the file name: random-looking, and reproducible."""
    return hashlib.blake2b(name.encode("utf-8"), digest_size=16).digest()


def container(schema: dict[str, Any], records: list[dict[str, Any]], codec: str, sync: bytes) -> bytes:
    """An Avro object container file of ``records``: one block, codec null or deflate, sync marker ``sync``."""
    if codec not in CODECS:
        raise ValueError(f"avro codec {codec!r}: expected one of {', '.join(CODECS)}")
    out = BytesIO()
    # sync_interval: no block boundary inside the file, as the sink writes one block per flush
    fastavro.writer(out, schema, records, codec=codec, sync_marker=sync, sync_interval=2**62)
    return out.getvalue()


@lru_cache
def _schema(table: str, extra: tuple[str, ...]) -> tuple[dict[str, Any], list[contract.SourceColumn]]:
    return writer_schema(table, extra), columns(table, extra)


def avro_pieces(table: str, records: list[Record], current: tuple[str, ...]) -> tuple[list[Piece], tuple[str, ...]]:
    """One CDC file's envelopes as Avro files cut where the writer schema changes, and the added columns after them
    (``current``: the sink's so far; older records projected, tombstones dropped: docs/internals/generator.md)."""
    added = [c.name for c in contract.SOURCES[table].added_columns]
    pieces: list[Piece] = []
    recs: list[dict[str, Any]] = []
    schema, cols = _schema(table, current)
    last = 0
    for arrival, text, _key, _lsn, nlines in records:
        obj = json.loads(text[:-5] if nlines == 2 else text)  # "\nnull": the tombstone
        env = obj.get("payload", obj)  # the envelope, with or without the schema block
        images = [i for i in (env.get("before"), env.get("after")) if i is not None]
        extra = tuple(c for c in added if any(c in i for i in images))
        if len(extra) < len(current):
            extra = current  # projected to the newer schema
        if extra != current:
            if recs:
                pieces.append((recs, len(recs), last, schema))
                recs = []
            current = extra
            schema, cols = _schema(table, extra)
        recs.append(record(env, cols))
        last = arrival
    if recs:
        pieces.append((recs, len(recs), last, schema))
    return pieces, current
