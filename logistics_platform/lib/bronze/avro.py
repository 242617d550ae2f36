"""Avro landing files -> the bronze rows the JSON path gives for the same events, one file at a time.

Decoded by DuckDB's ``read_avro`` (checked against the framing, :mod:`~logistics_platform.lib.bronze.avro_container`),
typed by :func:`~logistics_platform.lib.bronze.fastpath.vector_rows`; a record it cannot prove clean goes to the line
parser as its JSON rendering with a JsonConverter schema block (docs/internals/parsers.md).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

from logistics_platform.lib.bronze.avro_container import decode
from logistics_platform.lib.bronze.blocks import BlockResult, CorruptRead
from logistics_platform.lib.bronze.envelope import LineParser, Rejected, Widen
from logistics_platform.lib.bronze.fastpath import vector_rows
from logistics_platform.lib.bronze.landing import CorruptFileError, LandingFile
from logistics_platform.lib.bronze.values import (
    CONNECT_DECIMAL,
    CONNECT_TIMESTAMP,
    MICRO_TIMESTAMP,
    TIMESTAMP_UNITS,
    Decline,
    Encoding,
    promotions,
    schema_encodings,
    to_json_text,
)
from logistics_platform.lib.bronze.writer import rows_to_arrow
from logistics_platform.lib.timekeys import epoch_micros


@dataclass(frozen=True)
class AvroField:
    """A row field's writer schema: Avro type (null unwrapped), decimal scale, logical type, Connect name, precision."""

    name: str
    type: str
    scale: int | None = None
    logical: str | None = None
    connect_name: str | None = None
    precision: int | None = None

    def json_schema(self) -> dict[str, Any]:
        """The field as a JsonConverter schema block describes it (what the line parser reads of it)."""
        if self.type == "bytes" and self.logical == "decimal":
            params = {"scale": str(self.scale or 0)}
            if isinstance(self.precision, int):
                params["connect.decimal.precision"] = str(self.precision)
            return {"field": self.name, "type": "bytes", "name": CONNECT_DECIMAL, "parameters": params}
        if self.logical in ("timestamp-millis", "timestamp-micros"):
            name = CONNECT_TIMESTAMP if self.logical == "timestamp-millis" else MICRO_TIMESTAMP
            return {"field": self.name, "type": "int64", "name": name}
        out: dict[str, Any] = {"field": self.name, "type": self.type}
        if self.connect_name:
            out["name"] = self.connect_name
        return out


def _resolve(t: Any) -> Any:
    """A field's type without its null branch (a union of several types: kept)."""
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        return rest[0] if len(rest) == 1 else rest
    return t


def _expanded(schema: dict[str, Any]) -> Any:
    """A record writer schema with its named types expanded by fastavro (any other schema as is)."""
    return fastavro.parse_schema(schema, expand=True) if schema.get("type") == "record" else schema


def _top_fields(schema: dict[str, Any]) -> dict[str, Any]:
    """A writer schema's top-level field name -> type (null unwrapped, named types expanded)."""
    return {f.get("name"): _resolve(f.get("type")) for f in _expanded(schema).get("fields", [])}


def row_fields(schema: dict[str, Any], cdc: bool) -> dict[str, AvroField] | None:
    """Row column -> its :class:`AvroField`, from a file's writer schema (CDC: the ``after`` record's fields)."""
    record = _top_fields(schema).get("after") if cdc else _expanded(schema)
    if not isinstance(record, dict) or record.get("type") != "record":
        return None
    out: dict[str, AvroField] = {}
    for f in record["fields"]:
        t = _resolve(f["type"])
        if isinstance(t, str):
            out[f["name"]] = AvroField(f["name"], t)
        elif isinstance(t, dict) and isinstance(t.get("type"), str):
            scale = t.get("scale")
            out[f["name"]] = AvroField(
                f["name"],
                t["type"],
                int(scale) if isinstance(scale, int) else None,
                t.get("logicalType"),
                t.get("connect.name"),
                t.get("precision"),
            )
        else:
            out[f["name"]] = AvroField(f["name"], "union" if isinstance(t, list) else "complex")
    return out


# -- a record as JSON: what the line parser reads, and what the quarantine stores ----------------------------------
def _json_value(v: Any, field: AvroField | None = None) -> Any:
    if isinstance(v, bytes | bytearray):
        return base64.b64encode(v).decode("ascii")  # a Connect Decimal (or bytes) as JsonConverter writes it
    if isinstance(v, datetime):
        micros = epoch_micros(v)  # naive: UTC
        return micros // 1000 if field is not None and field.logical == "timestamp-millis" else micros
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)  # not JSON: kept as text, so that the column's check names it
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    return v


def _json_row(row: Any, fields: dict[str, AvroField]) -> Any:
    return {k: _json_value(v, fields.get(k)) for k, v in row.items()} if isinstance(row, dict) else row


def record_json(record: dict[str, Any], fields: dict[str, AvroField], cdc: bool) -> dict[str, Any]:
    """The record as the JsonConverter (``schemas.enable=false``) would write the same event."""
    if not cdc:
        return _json_row(record, fields)
    rest = {k: _json_value(v) for k, v in record.items() if k not in ("before", "after")}
    return {"before": _json_row(record.get("before"), fields), "after": _json_row(record.get("after"), fields), **rest}


def _encoding(field: AvroField) -> Encoding:
    """What a field's writer schema says of its values: a ``bytes`` decimal's scale, an integer timestamp's unit."""
    unit = TIMESTAMP_UNITS.get(field.connect_name or "", 1)
    return Encoding((field.scale or 0) if field.logical == "decimal" else None, unit)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def projection(schema: dict[str, Any], parser: LineParser) -> str:
    """What of a CDC file's records the vectorised path reads (DuckDB then converts half as much); else ``*``."""
    if not parser.cdc:
        return "*"
    top = _top_fields(schema)
    source, before = top.get("source"), top.get("before")
    if not {"after", "op", "source"} <= top.keys() or not isinstance(source, dict) or not isinstance(before, dict):
        return "*"
    source_fields = {f.get("name") for f in source.get("fields", [])}
    before_fields = {f.get("name") for f in before.get("fields", [])}
    picked = [n for n in ("lsn", "ts_ms", "txId") if n in source_fields]
    if not picked or parser.key not in before_fields:
        return "*"
    key, packed = _quote(parser.key), ", ".join(f"{_quote(n)} := source.{_quote(n)}" for n in picked)
    cols = [f"struct_pack({key} := before.{key}) as before", "after", "op", f"struct_pack({packed}) as source"]
    if "ts_ms" in top:
        cols.append("ts_ms")
    return ", ".join(cols)


# -- one file -------------------------------------------------------------------------------------------------
class AvroCorruptRead(CorruptRead):
    """Where reading a damaged container stopped: after the records of its complete, decodable blocks."""

    def __init__(self, f: LandingFile, error: str, records: int, at: int | None) -> None:
        super().__init__(f, CorruptFileError(f, error, at), f.start_offset + records, at or 0, b"")

    def detail(self) -> str:
        where = f"reading stopped after {self.lines} records (at offset {self.offset}"
        if self.error.compressed_at is not None:
            where += f", byte {self.error.compressed_at}"
        return f"{self.error.error}; {where}); file size {self.file.size} bytes"


def read_file(
    parser: LineParser, f: LandingFile, schema: pa.Schema, vectorised: bool = True
) -> tuple[BlockResult, AvroCorruptRead | None]:
    """One Avro landing file -> its rows (of ``schema``), quarantine records and counts, and where it is damaged
    (``unknown`` as for a block). ``vectorised=False``: every record through the line parser (same result, slower)."""
    decoded = decode(f.path, lambda header: projection(header.schema, parser))
    walk = decoded.walk
    corrupt = None if walk.error is None else AvroCorruptRead(f, walk.error, walk.records, walk.error_at)
    tbl = decoded.table
    if tbl is None or walk.header is None or not tbl.num_rows:
        return BlockResult(lines=0), corrupt
    fields = row_fields(walk.header.schema, parser.cdc) or {}
    block = {"fields": [{"field": "after", "fields": [fl.json_schema() for fl in fields.values()]}]}
    declared = schema_encodings(block)
    wider = promotions(parser.types, declared[1]) if declared else {}
    if wider:  # the writer schema declares a column wider than the table's: promoted before any record is read
        return BlockResult(wider=wider, unknown_at=f"{f.relpath}@{f.start_offset}"), corrupt
    n = tbl.num_rows
    out = BlockResult(lines=n)
    tables: list[pa.Table] = []
    try:
        if not vectorised:
            raise Decline
        encodings = {name: _encoding(field) for name, field in fields.items()}
        offsets = pa.array(np.arange(n, dtype=np.int64) + f.start_offset)
        rows, ok, out.late = vector_rows(
            parser, tbl, encodings, Encoding(None), offsets, f.kafka_partition, f.relpath, schema
        )
        tables.append(rows)
        rest = np.arange(0) if ok is None else np.flatnonzero(~ok)
    except (Decline, pa.ArrowInvalid):
        rest = np.arange(n)
    if len(rest):
        slow: list[Any] = []
        if decoded.select != "*":  # the records to render in full: read again with every field (few files have any)
            full = decode(f.path).table
            tbl = full if full is not None and full.num_rows == n else tbl
        records = tbl.take(pa.array(rest)).to_pylist()
        for i, record in zip(rest.tolist(), records, strict=True):
            offset = f.start_offset + i
            payload = record_json(record, fields, parser.cdc)
            line = to_json_text({"schema": block, "payload": payload} if parser.cdc else payload)
            res = parser.parse(line.encode("utf-8", "surrogatepass"), f.kafka_partition, offset, f.relpath)
            if isinstance(res, Widen):
                return BlockResult(wider=res.types, unknown_at=f"{f.relpath}@{offset}"), corrupt
            if isinstance(res, list):
                if res[-1] is not None:
                    return BlockResult(unknown=res[-1], unknown_at=f"{f.relpath}@{offset}"), corrupt
                out.late += bool(res[parser.column_names.index("_is_late")])
                slow.append(res)
            else:
                assert isinstance(res, Rejected)  # an Avro record is never a tombstone
                out.reasons[res.reason] = out.reasons.get(res.reason, 0) + 1
                address = (parser.topic, f.kafka_partition, offset, f.relpath, parser.arrival_us)
                out.quarantine.append((*address, res.reason, res.detail, to_json_text(payload), "utf-8"))
        if slow:
            tables.append(rows_to_arrow(slow, schema))
    out.rows = pa.concat_tables(tables) if tables else None
    return out, corrupt
