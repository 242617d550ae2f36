"""Avro binary encoding of Python values by a writer schema, and Debezium ``Envelope`` schemas of our topics.

What Confluent's AvroConverter writes for a Debezium event (tests and the benchmark make Avro landing files from the
same events as JSON ones with it): ``before``/``after`` the table's ``Value`` record (nullable fields as
``["null", T]`` unions), decimals ``bytes`` with the ``decimal`` logical type, timestamptz strings
(``io.debezium.time.ZonedTimestamp``), a ``source`` record, ``op``, ``ts_ms``.
"""

from __future__ import annotations

import json
import struct
from decimal import Decimal
from typing import Any

from logistics_platform.lib.bronze import schema as bs
from tests.support.connect_sink import _zigzag


def _union_index(branches: list[Any], value: Any) -> int:
    for i, b in enumerate(branches):
        t = b if isinstance(b, str) else b.get("type")
        if value is None and t == "null":
            return i
        if value is not None and t != "null":
            return i
    raise ValueError(f"no branch of {branches} for {value!r}")


def _names(schema: Any, named: dict[str, Any]) -> dict[str, Any]:
    """Every named record of ``schema`` by its name and its full name (a later reference may use either)."""
    if isinstance(schema, list):
        for s in schema:
            _names(s, named)
    elif isinstance(schema, dict) and schema.get("type") == "record":
        named[schema["name"]] = schema
        if schema.get("namespace"):
            named[f"{schema['namespace']}.{schema['name']}"] = schema
        for f in schema["fields"]:
            _names(f["type"], named)
    return named


def encode(schema: Any, value: Any, named: dict[str, Any] | None = None) -> bytes:
    """The Avro binary encoding of ``value`` by ``schema`` (records, unions, primitives, decimal bytes)."""
    named = _names(schema, {}) if named is None else named
    if isinstance(schema, list):
        i = _union_index(schema, value)
        return _zigzag(i) + encode(schema[i], value, named)
    if isinstance(schema, str):
        if schema in named:
            return encode(named[schema], value, named)
        schema = {"type": schema}
    t = schema["type"]
    if t == "record":
        return b"".join(encode(f["type"], (value or {}).get(f["name"]), named) for f in schema["fields"])
    if t == "null":
        return b""
    if t == "boolean":
        return b"\x01" if value else b"\x00"
    if t in ("int", "long"):
        return _zigzag(int(value))
    if t == "double":
        return struct.pack("<d", float(value))
    if t == "string":
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return _zigzag(len(raw)) + raw
    if t == "bytes":
        if schema.get("logicalType") == "decimal" and not isinstance(value, bytes | bytearray):
            unscaled = int(Decimal(str(value)).scaleb(int(schema.get("scale", 0))))
            raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
        else:
            raw = bytes(value)
        return _zigzag(len(raw)) + raw
    raise ValueError(f"Avro type {t!r} is not encoded here")


def _opt(t: Any) -> list[Any]:
    return ["null", t]


def _column_type(c: bs.Column) -> Any:
    from pyiceberg.types import BooleanType, DecimalType, DoubleType, LongType, StringType, TimestampType

    if isinstance(c.type, DecimalType):
        return {
            "type": "bytes",
            "scale": c.type.scale,
            "precision": c.type.precision,
            "connect.version": 1,
            "connect.parameters": {"scale": str(c.type.scale)},
            "connect.name": "org.apache.kafka.connect.data.Decimal",
            "logicalType": "decimal",
        }
    if isinstance(c.type, TimestampType):
        return {"type": "string", "connect.version": 1, "connect.name": "io.debezium.time.ZonedTimestamp"}
    if isinstance(c.type, LongType):
        return "long"
    if isinstance(c.type, DoubleType):
        return "double"
    if isinstance(c.type, BooleanType):
        return "boolean"
    assert isinstance(c.type, StringType)
    return "string"


def envelope_schema(spec: bs.TopicSpec, extra: tuple[bs.Column, ...] = ()) -> dict[str, Any]:
    """The writer schema of a topic's Debezium envelope (``extra``: columns the table gained, e.g. tip_amount)."""
    prefix = spec.topic
    fields = [
        {"name": c.name, "type": _column_type(c) if c.name == spec.key else _opt(_column_type(c)), "default": None}
        for c in (*spec.columns, *extra)
    ]
    for f in fields:
        if not isinstance(f["type"], list):
            del f["default"]
    value = {
        "type": "record",
        "name": "Value",
        "namespace": prefix,
        "fields": fields,
        "connect.name": f"{prefix}.Value",
    }
    source = {
        "type": "record",
        "name": "Source",
        "namespace": "io.debezium.connector.postgresql",
        "fields": [
            {"name": "version", "type": "string"},
            {"name": "connector", "type": "string"},
            {"name": "name", "type": "string"},
            {"name": "ts_ms", "type": "long"},
            {"name": "snapshot", "type": _opt("string"), "default": None},
            {"name": "db", "type": "string"},
            {"name": "sequence", "type": _opt("string"), "default": None},
            {"name": "schema", "type": "string"},
            {"name": "table", "type": "string"},
            {"name": "txId", "type": _opt("long"), "default": None},
            {"name": "lsn", "type": _opt("long"), "default": None},
            {"name": "xmin", "type": _opt("long"), "default": None},
        ],
    }
    return {
        "type": "record",
        "name": "Envelope",
        "namespace": prefix,
        "fields": [
            {"name": "before", "type": _opt(value), "default": None},
            {"name": "after", "type": _opt(f"{prefix}.Value"), "default": None},
            {"name": "source", "type": source},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": _opt("long"), "default": None},
        ],
        "connect.name": f"{prefix}.Envelope",
    }


def plain_schema(spec: bs.TopicSpec) -> dict[str, Any]:
    """The writer schema of a topic that is not CDC (pings): its columns, the key required."""
    fields = [
        {"name": c.name, "type": _column_type(c) if c.name == spec.key else _opt(_column_type(c)), "default": None}
        for c in spec.columns
    ]
    for f in fields:
        if not isinstance(f["type"], list):
            del f["default"]
    return {"type": "record", "name": "Value", "namespace": spec.topic, "fields": fields}


def _source_value(source: dict[str, Any]) -> dict[str, Any]:
    out = dict(source)
    for k in ("version", "connector", "name", "db", "schema", "table"):
        out[k] = str(out.get(k) or "")
    if out.get("snapshot") is not None:
        out["snapshot"] = str(out["snapshot"]).lower()
    if out.get("sequence") is not None and not isinstance(out["sequence"], str):
        out["sequence"] = json.dumps(out["sequence"])
    return out


def envelope_datum(schema: dict[str, Any], envelope: dict[str, Any]) -> bytes:
    """The Avro datum of a JSON envelope (``schemas.enable=false`` form, decimals as decimal strings)."""
    value = dict(envelope)
    if "source" in value and isinstance(value["source"], dict):
        value["source"] = _source_value(value["source"])
    return encode(schema, value)


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"))
