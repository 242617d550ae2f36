"""Debezium ``Envelope`` writer schemas of our topics, and the records fastavro writes under them for JSON envelopes.

What Confluent's AvroConverter writes for a Debezium event (tests and the benchmark make Avro landing files from the
same events as JSON ones with it): ``before``/``after`` the table's ``Value`` record (nullable fields as
``["null", T]`` unions), decimals ``bytes`` with the ``decimal`` logical type, timestamptz strings
(``io.debezium.time.ZonedTimestamp``), a ``source`` record, ``op``, ``ts_ms``.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from logistics_platform.lib.bronze import schema as bs


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


def _decimal_scales(schema: dict[str, Any]) -> dict[str, int]:
    """The scale of every decimal field of the row record (``Value``) of an envelope or plain schema."""
    value = schema if schema["name"] == "Value" else schema["fields"][0]["type"][1]
    types = {f["name"]: f["type"][-1] if isinstance(f["type"], list) else f["type"] for f in value["fields"]}
    return {n: t["scale"] for n, t in types.items() if isinstance(t, dict) and t.get("logicalType") == "decimal"}


def _image(image: Any, scales: dict[str, int]) -> Any:
    """A row image with each decimal as the unscaled two's-complement bytes Avro's ``decimal`` holds.

    Bytes rather than ``Decimal``: fastavro refuses a Decimal beyond the schema's precision, and the tests land such
    values (an amount of 13 digits) to see them quarantined as the same line in JSON would be.
    """
    if not isinstance(image, dict):
        return image
    out = dict(image)
    for name, scale in scales.items():
        v = out.get(name)
        if v is not None and not isinstance(v, bytes | bytearray):
            unscaled = int(Decimal(str(v)).scaleb(scale))
            out[name] = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
    return out


def avro_record(schema: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    """The record fastavro writes for a JSON envelope (``schemas.enable=false`` form, decimals as decimal strings)
    or a plain row (pings) under ``schema``."""
    scales = _decimal_scales(schema)
    if "source" not in value:
        return _image(value, scales)
    out = dict(value)
    out["before"], out["after"] = _image(out.get("before"), scales), _image(out.get("after"), scales)
    if isinstance(out["source"], dict):
        out["source"] = _source_value(out["source"])
    return out
