"""Avro landing files -> the bronze rows the JSON path gives for the same events, one file at a time.

Each file is decoded by DuckDB's ``read_avro`` (checked against the container's framing,
:mod:`~logistics_platform.lib.bronze.avro_container`) with its own writer schema: ``read_avro`` has no
``union_by_name``, and a file's schema says how its values are encoded (a decimal's scale). The records are then
typed in Arrow, vectorised; a record the vectorised path cannot prove clean goes to the line parser
(:class:`~logistics_platform.lib.bronze.envelope.LineParser`, the source of truth) as the JSON rendering of the
record with a JsonConverter schema block saying what the Avro schema says (a ``bytes`` decimal is a Connect
``Decimal`` of the field's scale), so it is accepted or quarantined exactly as the same event in JSON would be.
"""

from __future__ import annotations

import base64
import json
import math
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from logistics_platform.lib.bronze.avro_container import AvroFormatError, decode, read_header
from logistics_platform.lib.bronze.blocks import BlockResult, CorruptRead
from logistics_platform.lib.bronze.envelope import (
    IDENTITY_SEPARATOR,
    PLAIN_EVENT_TIME_COLUMN,
    LineParser,
    Rejected,
    identity_hasher,
)
from logistics_platform.lib.bronze.fastpath import MONEY_RE
from logistics_platform.lib.bronze.landing import CorruptFileError, LandingFile
from logistics_platform.lib.bronze.values import (
    CONNECT_DECIMAL,
    K_BOOL,
    K_DECIMAL,
    K_DOUBLE,
    K_LONG,
    K_STRING,
    K_TEXT_OR_JSON,
    K_TIMESTAMP,
    NANO_TIMESTAMP,
    TIMESTAMP_UNITS,
)
from logistics_platform.lib.bronze.writer import rows_to_arrow

_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
_TS_UTC = pa.timestamp("us", "UTC")
# What Arrow parses to the microsecond exactly as datetime.fromisoformat does (1 to 6 fraction digits, UTC "Z").
TIMESTAMP_RE = (
    r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?Z$"
)
_MONEY = pa.decimal128(12, 2)
_MAX_UNSCALED = 10**12  # DECIMAL(12,2): at most 12 digits unscaled
_I53 = 2**53
_HASHER = identity_hasher()
CONNECT_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
MICRO_TIMESTAMP = "io.debezium.time.MicroTimestamp"


class _Decline(Exception):
    """The vectorised path cannot type this file's records: every record goes to the line parser."""


@dataclass(frozen=True)
class AvroField:
    """What a row image field's writer schema says: its Avro type (unions with null unwrapped), decimal scale,
    logical type and Kafka Connect name."""

    name: str
    type: str
    scale: int | None = None
    logical: str | None = None
    connect_name: str | None = None

    def json_schema(self) -> dict[str, Any]:
        """The field as a JsonConverter schema block describes it (what the line parser reads of it)."""
        if self.type == "bytes" and self.logical == "decimal":
            return {
                "field": self.name,
                "type": "bytes",
                "name": CONNECT_DECIMAL,
                "parameters": {"scale": str(self.scale or 0)},
            }
        if self.logical in ("timestamp-millis", "timestamp-micros"):
            name = CONNECT_TIMESTAMP if self.logical == "timestamp-millis" else MICRO_TIMESTAMP
            return {"field": self.name, "type": "int64", "name": name}
        out: dict[str, Any] = {"field": self.name, "type": self.type}
        if self.connect_name:
            out["name"] = self.connect_name
        return out


def _named(schema: Any, out: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    if isinstance(schema, list):
        for s in schema:
            _named(s, out, namespace)
    elif isinstance(schema, dict) and schema.get("type") == "record":
        ns = schema.get("namespace", namespace)
        out[schema["name"]] = schema
        out[f"{ns}.{schema['name']}" if ns else schema["name"]] = schema
        for f in schema.get("fields", []):
            _named(f.get("type"), out, ns)
    return out


def _resolve(t: Any, named: dict[str, Any]) -> Any:
    """A field's type without its null branch, name references resolved (a union of several types: kept)."""
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        t = rest[0] if len(rest) == 1 else rest
    if isinstance(t, str) and t not in _PRIMITIVES:
        return named.get(t, t)
    return t


def row_fields(schema: dict[str, Any], cdc: bool) -> dict[str, AvroField] | None:
    """Row column -> its :class:`AvroField`, from a file's writer schema (CDC: the ``after`` record's fields)."""
    named = _named(schema, {})
    record: Any = schema
    if cdc:
        after = next((f for f in schema.get("fields", []) if f.get("name") == "after"), None)
        if after is None:
            return None
        record = _resolve(after["type"], named)
    if not isinstance(record, dict) or record.get("type") != "record":
        return None
    out: dict[str, AvroField] = {}
    for f in record["fields"]:
        t = _resolve(f["type"], named)
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
            )
        else:
            out[f["name"]] = AvroField(f["name"], "union" if isinstance(t, list) else "complex")
    return out


# -- a record as JSON: what the line parser reads, and what the quarantine stores ----------------------------------
def _json_value(v: Any, field: AvroField | None = None) -> Any:
    if isinstance(v, bytes | bytearray):
        return base64.b64encode(v).decode("ascii")  # a Connect Decimal (or bytes) as JsonConverter writes it
    if isinstance(v, datetime):
        us = (v if v.tzinfo else v.replace(tzinfo=UTC)) - datetime(1970, 1, 1, tzinfo=UTC)
        micros = (us.days * 86400 + us.seconds) * 1_000_000 + us.microseconds
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
    if not isinstance(row, dict):
        return row
    return {k: _json_value(v, fields.get(k)) for k, v in row.items()}


def record_json(record: dict[str, Any], fields: dict[str, AvroField], cdc: bool) -> dict[str, Any]:
    """The record as the JsonConverter (``schemas.enable=false``) would write the same event."""
    if not cdc:
        return _json_row(record, fields)
    out = {k: _json_value(v) for k, v in record.items() if k not in ("before", "after")}
    out["before"] = _json_row(record.get("before"), fields)
    out["after"] = _json_row(record.get("after"), fields)
    return {"before": out.pop("before"), "after": out.pop("after"), **out}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- vectorised typing ----------------------------------------------------------------------------------------
def _true(n: int) -> pa.Array:
    return pa.repeat(pa.scalar(True), n)


def _mask(a: Any) -> pa.Array:
    return pc.fill_null(a, False)


def unscaled(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(unscaled int64, usable) of a binary array of two's-complement big-endian integers (usable: 1..8 bytes)."""
    n = len(values)
    arr = values.cast(pa.binary())
    lengths = np.asarray(pc.fill_null(pc.binary_length(arr), 0), np.int64)
    usable = (lengths >= 1) & (lengths <= 8)
    out = np.zeros(n, np.int64)
    if not usable.any():
        return out, usable
    lengths = np.where(usable, lengths, 0)
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, np.int32, n + 1, arr.offset * 4).astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    rows = np.repeat(np.arange(n), lengths)
    firsts = offsets[:-1]
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    src = np.repeat(firsts, lengths) + within
    negative = np.zeros(n, bool)
    has = lengths > 0
    negative[has] = data[firsts[has]] >= 0x80
    mat = np.where(negative[:, None], np.uint8(0xFF), np.uint8(0)).astype(np.uint8)
    mat = np.ascontiguousarray(np.broadcast_to(mat, (n, 8)))
    mat[rows, 8 - np.repeat(lengths, lengths) + within] = data[src]
    out = mat.view(">i8").reshape(n).astype(np.int64)
    return out, usable


def _money(unscaled_2: np.ndarray, present: np.ndarray) -> pa.Array:
    """DECIMAL(12,2) of unscaled values (decimal128: 16-byte little-endian two's complement), null where not
    ``present``."""
    words = np.empty((len(unscaled_2), 2), np.int64)
    words[:, 0] = unscaled_2
    words[:, 1] = unscaled_2 >> 63
    valid = None if present.all() else pa.array(present, pa.bool_()).buffers()[1]
    return pa.Array.from_buffers(_MONEY, len(unscaled_2), [valid, pa.py_buffer(words.tobytes())])


def _bytes_decimal(values: pa.Array, scale: int) -> tuple[pa.Array, pa.Array]:
    u, usable = unscaled(values)
    if scale > 2:
        d = 10 ** (scale - 2)
        usable &= np.remainder(u, d) == 0
        u = u // d
    elif scale < 2:
        m = 10 ** (2 - scale)
        usable &= np.abs(u) < _MAX_UNSCALED // m
        u = u * np.where(usable, m, 0)
    usable &= np.abs(u) < _MAX_UNSCALED
    present = np.asarray(pc.is_valid(values))
    good = pa.array(~present | usable)
    return _money(np.where(usable, u, 0), present & usable), good


def _typed(kind: str, values: pa.Array, field: AvroField | None) -> tuple[pa.Array, pa.Array]:
    """(values typed as the line parser types them, good) where good is false for a value it might not accept."""
    n = len(values)
    t = values.type
    if pa.types.is_null(t):
        return values, _true(n)
    if kind in (K_STRING, K_TEXT_OR_JSON):
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return values.cast(pa.string()), _true(n)
        if kind == K_TEXT_OR_JSON and (pa.types.is_binary(t) or pa.types.is_large_binary(t)):
            texts = [None if v is None else base64.b64encode(v).decode("ascii") for v in values.to_pylist()]
            return pa.array(texts, pa.string()), _true(n)
        raise _Decline
    if kind == K_LONG:
        if pa.types.is_integer(t):
            return values.cast(pa.int64()), _true(n)
        raise _Decline
    if kind == K_BOOL:
        if pa.types.is_boolean(t):
            return values, _true(n)
        raise _Decline
    if kind == K_DOUBLE:
        if pa.types.is_floating(t) or pa.types.is_integer(t):
            v = values.cast(pa.float64())
            return v, _mask(pc.or_kleene(pc.is_null(v), pc.is_finite(v)))
        raise _Decline
    if kind == K_DECIMAL:
        if (pa.types.is_binary(t) or pa.types.is_large_binary(t)) and field is not None and field.logical == "decimal":
            return _bytes_decimal(values, field.scale or 0)
        if pa.types.is_string(t):
            good = _mask(pc.or_kleene(pc.is_null(values), pc.match_substring_regex(values, MONEY_RE)))
            return pc.if_else(good, values, pa.nulls(n, t)).cast(_MONEY), good
        raise _Decline
    if kind == K_TIMESTAMP:
        if pa.types.is_string(t):
            good = _mask(pc.or_kleene(pc.is_null(values), pc.match_substring_regex(values, TIMESTAMP_RE)))
            try:
                micros = pc.if_else(good, values, pa.nulls(n, t)).cast(_TS_UTC).cast(pa.int64())
            except pa.ArrowInvalid:  # a canonical-looking impossible date (2026-02-30): the parser says so
                raise _Decline from None
            return micros, good
        if pa.types.is_timestamp(t):
            return values.cast(pa.timestamp("us", t.tz)).cast(pa.int64()), _true(n)
        if pa.types.is_integer(t):
            name = field.connect_name if field is not None else None
            v = values.cast(pa.int64())
            if name == NANO_TIMESTAMP:
                raise _Decline  # floor division by 1000, as the parser: left to it
            unit = TIMESTAMP_UNITS.get(name or "", 1)
            if unit == 1:
                return v, _true(n)
            try:
                return pc.multiply_checked(v, unit), _true(n)
            except pa.ArrowInvalid:
                raise _Decline from None
        raise _Decline
    raise _Decline


def _field(struct: pa.Array, name: str, n: int) -> pa.Array:
    if pa.types.is_struct(struct.type) and struct.type.get_field_index(name) >= 0:
        return pc.struct_field(struct, name)
    return pa.nulls(n)


def _column(tbl: pa.Table, name: str) -> pa.Array:
    return tbl.column(name).combine_chunks() if name in tbl.column_names else pa.nulls(tbl.num_rows)


def vector_rows(
    parser: LineParser,
    tbl: pa.Table,
    fields: dict[str, AvroField],
    f: LandingFile,
    schema: pa.Schema,
) -> tuple[pa.Table, np.ndarray, int]:
    """(rows of the records proven clean, which records those are, late count); raises _Decline when the file's
    types are not ones this path reads."""
    n = tbl.num_rows
    cols: dict[str, Any] = {}
    key_name = parser.key
    string_key = parser.key_kind == K_STRING
    if parser.cdc:
        op = _column(tbl, "op")
        if not pa.types.is_string(op.type):
            raise _Decline
        source = _column(tbl, "source")
        lsn, ts_ms = _field(source, "lsn", n), _field(source, "ts_ms", n)
        tx = _field(source, "txId", n)
        if not all(pa.types.is_integer(a.type) or pa.types.is_null(a.type) for a in (lsn, ts_ms, tx)):
            raise _Decline
        lsn, ts_ms, tx = lsn.cast(pa.int64()), ts_ms.cast(pa.int64()), tx.cast(pa.int64())
        conn = _column(tbl, "ts_ms")
        if not (pa.types.is_integer(conn.type) or pa.types.is_null(conn.type)):
            raise _Decline
        conn = conn.cast(pa.int64())
        before, after = _column(tbl, "before"), _column(tbl, "after")
        ok = _mask(pc.is_in(op, value_set=pa.array(["c", "u", "d", "r"])))
        ok = pc.and_kleene(ok, _mask(pc.and_kleene(pc.greater_equal(ts_ms, -_I53), pc.less(ts_ms, _I53))))
        ok = pc.and_kleene(ok, pc.is_valid(lsn))
        is_delete = _mask(pc.equal(op, "d"))
        ok = pc.and_kleene(ok, pc.if_else(is_delete, pc.is_valid(before), pc.is_valid(after)))
        key_before, key_after = _field(before, key_name, n), _field(after, key_name, n)
        key_kind = K_STRING if string_key else K_LONG
        key_b, _ = _typed(key_kind, key_before, None)
        key_a, _ = _typed(key_kind, key_after, None)
        key_type = pa.string() if string_key else pa.int64()
        key = pc.if_else(is_delete, key_b.cast(key_type), key_a.cast(key_type))
        for name, kind in parser.columns:
            if name == key_name:
                continue
            values, good = _typed(kind, _field(after, name, n), fields.get(name))
            ok = pc.and_kleene(ok, pc.or_kleene(is_delete, good))
            cols[name] = pc.if_else(is_delete, pa.nulls(n, values.type), values)
        for name in fields:
            if name not in parser.known:  # a column the table lacks: the parser evolves the table with it
                ok = pc.and_kleene(ok, pc.or_kleene(is_delete, pc.is_null(_field(after, name, n))))
        conn_ok = _mask(pc.and_kleene(pc.greater_equal(conn, -_I53), pc.less(conn, _I53)))
        connector_us = pc.if_else(conn_ok, pc.multiply(pc.if_else(conn_ok, conn, 0), 1000), pa.nulls(n, pa.int64()))
        event_us = pc.multiply(pc.fill_null(ts_ms, 0), 1000)
    else:
        ok = _true(n)
        for name, kind in parser.columns:
            values, good = _typed(kind, _column(tbl, name), fields.get(name))
            cols[name] = values
            ok = pc.and_kleene(ok, good)
        key = cols[key_name].cast(pa.string() if string_key else pa.int64())
        for name in fields:
            if name not in parser.known:
                ok = pc.and_kleene(ok, pc.is_null(_column(tbl, name)))
        event_us = cols[PLAIN_EVENT_TIME_COLUMN]
        ok = pc.and_kleene(ok, pc.is_valid(event_us))
    ok = pc.and_kleene(ok, pc.is_valid(key))
    if string_key:
        ok = pc.and_kleene(ok, _mask(pc.greater(pc.binary_length(key), 0)))
    ok_np = np.asarray(_mask(ok), bool)
    keep = pa.array(ok_np)
    m = int(ok_np.sum())
    key = pc.filter(key, keep)
    event_us = pc.filter(event_us, keep)
    cols = {k: pc.filter(v, keep) for k, v in cols.items()}
    cols[key_name] = key
    is_late = pc.less(event_us, parser.late_before_us)
    gap = pc.subtract(pa.scalar(parser.arrival_us, pa.int64()), event_us)
    lateness = pc.if_else(pc.greater(gap, 0), pc.divide(gap, 1_000_000), 0)
    topic = parser.topic
    key_text = key if string_key else key.cast(pa.string())
    if parser.cdc:
        op_k, lsn_k = pc.filter(op, keep), pc.filter(lsn, keep)
        id_text = pc.binary_join_element_wise(topic, key_text, lsn_k.cast(pa.string()), op_k, IDENTITY_SEPARATOR)
        cols.update(_op=op_k, _lsn=lsn_k, _tx_id=pc.filter(tx, keep), _connector_ts=pc.filter(connector_us, keep))
    else:
        id_text = pc.binary_join_element_wise(topic, key_text, IDENTITY_SEPARATOR)
    cols.update(
        _topic=pa.repeat(pa.scalar(topic, pa.string()), m),
        _kafka_partition=pa.repeat(pa.scalar(f.kafka_partition, pa.int32()), m),
        _offset=pa.array(np.flatnonzero(ok_np) + f.start_offset, pa.int64()),
        _source_file=pa.repeat(pa.scalar(f.relpath, pa.string()), m),
        _event_id=pa.array(_event_ids(id_text), pa.string()),
        _event_time=event_us,
        _arrival_hour=pa.repeat(pa.scalar(parser.arrival_us, pa.int64()), m),
        _is_late=is_late,
        _lateness_seconds=lateness,
    )
    arrays = [cols[fl.name].cast(fl.type) if fl.name in cols else pa.nulls(m, fl.type) for fl in schema]
    late = int(pc.sum(is_late).as_py() or 0)
    return pa.Table.from_arrays(arrays, schema=schema), ok_np, late


def _event_ids(texts: pa.Array) -> list[str]:
    copy = _HASHER.copy
    out: list[str] = []
    for t in texts.cast(pa.binary()).to_pylist():
        h = copy()
        h.update(t)
        out.append(h.hexdigest())
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def projection(schema: dict[str, Any], parser: LineParser) -> str:
    """What of a CDC file's records the vectorised path reads: ``after``, the key of ``before``, ``op``, ``ts_ms`` and
    ``source``'s lsn, ts_ms and txId (DuckDB then converts half as much); ``*`` for any other shape."""
    if not parser.cdc:
        return "*"
    named = _named(schema, {})
    top = {f.get("name"): _resolve(f.get("type"), named) for f in schema.get("fields", [])}
    source, before = top.get("source"), top.get("before")
    if not {"after", "op", "source"} <= top.keys() or not isinstance(source, dict) or not isinstance(before, dict):
        return "*"
    source_fields = {f.get("name") for f in source.get("fields", [])}
    before_fields = {f.get("name") for f in before.get("fields", [])}
    picked = [n for n in ("lsn", "ts_ms", "txId") if n in source_fields]
    if not picked or parser.key not in before_fields:
        return "*"
    key = _quote(parser.key)
    cols = [
        f"struct_pack({key} := before.{key}) as before",
        "after",
        "op",
        "struct_pack(" + ", ".join(f"{_quote(n)} := source.{_quote(n)}" for n in picked) + ") as source",
    ]
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
    """One Avro landing file -> its rows (of ``schema``), quarantine records and counts, and where it is damaged.

    The result's ``unknown`` is set (nothing else) when a record holds columns the table lacks, as for a block.
    ``vectorised=False`` sends every record through the line parser (the source of truth: same result, slower).
    """
    try:
        select = projection(read_header(f.path).schema, parser)
    except (AvroFormatError, OSError):
        select = "*"  # what is wrong with the file, decode says
    decoded = decode(f.path, select)
    walk = decoded.walk
    corrupt = None if walk.error is None else AvroCorruptRead(f, walk.error, walk.records, walk.error_at)
    tbl = decoded.table
    if tbl is None or walk.header is None or not tbl.num_rows:
        return BlockResult(lines=0), corrupt
    fields = row_fields(walk.header.schema, parser.cdc)
    if fields is None:
        fields = {}
    n = tbl.num_rows
    tables: list[pa.Table] = []
    late = 0
    try:
        if not vectorised:
            raise _Decline
        rows, ok, late = vector_rows(parser, tbl, fields, f, schema)
        tables.append(rows)
        rest = np.flatnonzero(~ok)
    except (_Decline, pa.ArrowInvalid):
        rest = np.arange(n)
    quarantine: list[tuple[Any, ...]] = []
    reasons: Counter[str] = Counter()
    if len(rest):
        block = {"fields": [{"field": "after", "fields": [fl.json_schema() for fl in fields.values()]}]}
        slow: list[Any] = []
        hour_us = parser.arrival_us
        if select != "*":  # the records to render in full: read again with every field (few files have any)
            full = decode(f.path).table
            tbl = full if full is not None and full.num_rows == n else tbl
        records = tbl.take(pa.array(rest)).to_pylist()
        for i, record in zip(rest.tolist(), records, strict=True):
            offset = f.start_offset + i
            payload = record_json(record, fields, parser.cdc)
            line = _dumps({"schema": block, "payload": payload} if parser.cdc else payload)
            res = parser.parse(line.encode("utf-8", "surrogatepass"), f.kafka_partition, offset, f.relpath)
            if isinstance(res, list):
                if res[-1] is not None:
                    return BlockResult(unknown=res[-1], unknown_at=f"{f.relpath}@{offset}"), corrupt
                late += bool(res[parser.column_names.index("_is_late")])
                slow.append(res)
            else:
                assert isinstance(res, Rejected)  # an Avro record is never a tombstone
                reasons[res.reason] += 1
                address = (parser.topic, f.kafka_partition, offset, f.relpath, hour_us)
                quarantine.append((*address, res.reason, res.detail, _dumps(payload), "utf-8"))
        if slow:
            tables.append(rows_to_arrow(slow, schema))
    rows_tbl = None
    if tables:
        rows_tbl = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    return BlockResult(rows=rows_tbl, quarantine=quarantine, lines=n, late=late, reasons=dict(reasons)), corrupt


def is_avro(f: LandingFile) -> bool:
    """Whether a landing file is an Avro container (read here, not as lines)."""
    return f.relpath.endswith(".avro")
