"""Vectorised clean path of the bronze line parser: a run of lines decoded and typed by Arrow at C speed.

:class:`~logistics_platform.lib.bronze.envelope.LineParser` stays the source of truth. :func:`fast_rows` only
answers for a run of lines when it can prove that every line of it would have been accepted by the per-line
path with exactly these values; otherwise it returns ``None`` and the caller parses the run line by line.
It declines on anything out of the ordinary: not UTF-8, a line that is not exactly one ``{...}`` object,
a field the explicit schema does not declare (extra row columns, schema/payload envelopes, tombstones),
a value of another JSON type than the column's, duplicate keys, NaN/Infinity, missing or null keys, a bad op,
missing ``source.lsn``/``source.ts_ms`` or values out of range, and any timestamp or decimal that
:func:`~logistics_platform.lib.bronze.values.typed` does not take (the forms the connector writes).
Columns added by schema evolution are read like contract columns (evolved string columns only when every value
is a JSON string). :func:`vector_rows` builds the rows of Arrow-read records for this path, for
:mod:`~logistics_platform.lib.bronze.isolate` (a block but for its odd lines) and for Avro files.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from logistics_platform.lib.bronze.envelope import PLAIN_EVENT_TIME_COLUMN, LineParser
from logistics_platform.lib.bronze.values import (
    DECIMAL_PRECISE,
    I53,
    IDENTITY_SEPARATOR,
    K_BOOL,
    K_DECIMAL,
    K_DOUBLE,
    K_LONG,
    K_STRING,
    K_TEXT_OR_JSON,
    K_TIMESTAMP,
    Decline,
    Encoding,
    event_ids,
    typed,
)

# An evolved string column (K_TEXT_OR_JSON) also takes other JSON values as text per line: read strictly as a
# string here, any other value makes Arrow fail and the run go line by line.
_JSON_TYPE = {
    K_STRING: pa.string(),
    K_TEXT_OR_JSON: pa.string(),
    K_LONG: pa.int64(),
    K_DOUBLE: pa.float64(),
    K_BOOL: pa.bool_(),
}
# Read as text, then checked against the canonical form before any cast (the per-line path accepts more).
TEXT_KINDS = (K_DECIMAL, K_TIMESTAMP)
_SOURCE_FIELDS = (
    ("version", pa.string()),
    ("connector", pa.string()),
    ("name", pa.string()),
    ("ts_ms", pa.int64()),
    ("snapshot", pa.string()),
    ("db", pa.string()),
    ("sequence", pa.string()),
    ("schema", pa.string()),
    ("table", pa.string()),
    ("txId", pa.int64()),
    ("lsn", pa.int64()),
    ("xmin", pa.int64()),
    # Debezium 3.x adds these; the per-line parser ignores them, so any value of the declared type is fine.
    ("ts_us", pa.int64()),
    ("ts_ns", pa.int64()),
    ("origin", pa.string()),
    ("origin_lsn", pa.int64()),
)
# The envelope's transaction block (Debezium's provide.transaction.metadata), null nearly always.
_TRANSACTION = pa.struct([("id", pa.string()), ("total_order", pa.int64()), ("data_collection_order", pa.int64())])
_OPS = pa.array(["c", "u", "d", "r"])
_NL, _OPEN, _CLOSE = 0x0A, 0x7B, 0x7D
READ_OPTIONS = pj.ReadOptions(use_threads=False, block_size=1 << 26)
_OPTIONS: dict[tuple[Any, ...], pj.ParseOptions] = {}


def parse_options(parser: LineParser) -> pj.ParseOptions:
    """The JSON reader's explicit schema for a parser's lines (decimals and timestamps read as text)."""
    key = (parser.spec.table, tuple(parser.columns))  # the decimal mode does not change what Arrow reads
    opts = _OPTIONS.get(key)
    if opts is None:
        row = pa.struct([(n, pa.string() if k in TEXT_KINDS else _JSON_TYPE[k]) for n, k in parser.columns])
        if parser.cdc:
            schema = pa.schema(
                [
                    ("before", row),
                    ("after", row),
                    ("source", pa.struct(list(_SOURCE_FIELDS))),
                    ("op", pa.string()),
                    ("ts_ms", pa.int64()),
                    ("ts_us", pa.int64()),
                    ("ts_ns", pa.int64()),
                    ("transaction", _TRANSACTION),
                ]
            )
        else:
            schema = pa.schema(list(row))
        opts = _OPTIONS[key] = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    return opts


def json_encodings(parser: LineParser) -> tuple[dict[str, Encoding], Encoding]:
    """(per column, default) encodings of JSON lines without a schema block: the connector's decimal mode decides."""
    if parser.decimal_mode != DECIMAL_PRECISE:
        return {}, Encoding(None)
    return {name: Encoding(scale) for name, scale in parser.scales.items()}, Encoding()


def fast_rows(
    parser: LineParser, lines: list[bytes], kafka_partition: int, first_offset: int, source_file: str, schema: pa.Schema
) -> tuple[pa.Table, int, int] | None:
    """(rows of ``schema``, late count, tombstones) for a run of lines, or None: parse them line by line."""
    if not lines:
        return None
    return fast_block(parser, b"\n".join(lines), len(lines), kafka_partition, first_offset, source_file, schema)


def newline_positions(block: bytes) -> np.ndarray:
    """Byte positions of the newlines between a block's lines (a last newline ends the last line: not listed).

    The block holds one line more than this lists, as the reader counts lines (a last line without newline counts).
    """
    end = len(block) - 1 if block.endswith(b"\n") else len(block)
    return np.flatnonzero(np.frombuffer(block, np.uint8, end) == _NL)


def object_lines(block: bytes, n_lines: int, newlines: np.ndarray | None = None) -> list[tuple[int, int]] | None:
    """Where the tombstones are in a block whose every other line is exactly one ``{...}``; None if it is not so.

    ``block`` holds ``n_lines`` lines separated by newlines (the last newline optional, so that a file's last
    line without one counts); ``newlines``: its :func:`newline_positions`, when the reader found them already.
    The answer lists (line index, byte position) of each line that is exactly ``null`` (a Kafka tombstone), and
    is empty when every line starts with ``{`` and ends with ``}``.
    """
    layout = odd_lines(block, n_lines, newlines)
    return None if layout is None or layout[1] else layout[0]


def odd_lines(
    block: bytes, n_lines: int, newlines: np.ndarray | None = None
) -> tuple[list[tuple[int, int]], list[int]] | None:
    """:func:`object_lines`, and the indices of the other lines that are not one ``{...}`` instead of None.

    None only when the block is not as described, or its first or last line is empty.

    Vectorised over the block's newlines (CPython's bytes.count, and a scan line by line, cost several times
    more): a line is proven ``{...}`` by the byte after the newline in front of it and the byte before the
    newline behind it; only the lines that are not, expected to be few, are looked at one by one.
    """
    end = len(block) - 1 if block.endswith(b"\n") else len(block)
    if n_lines < 1 or end < 1:
        return None
    data = np.frombuffer(block, np.uint8, end)
    if data[0] == _NL or data[end - 1] == _NL:
        return None  # an empty first or last line (and no byte on one side of that newline)
    if newlines is None:
        newlines = newline_positions(block)
    if len(newlines) != n_lines - 1:
        return None  # not the block described
    ends_ok = data[newlines - 1] == _CLOSE  # line k ends with }
    starts_ok = data[newlines + 1] == _OPEN  # line k + 1 starts with {
    odd: list[int] = [0] if data[0] != _OPEN else []
    for k in np.flatnonzero(~(ends_ok & starts_ok)).tolist():
        if not ends_ok[k] and (not odd or odd[-1] != k):
            odd.append(k)
        if not starts_ok[k]:
            odd.append(k + 1)
    if data[end - 1] != _CLOSE and (not odd or odd[-1] != n_lines - 1):
        odd.append(n_lines - 1)
    tombstones: list[tuple[int, int]] = []
    others: list[int] = []
    for i in odd:
        start = int(newlines[i - 1]) + 1 if i else 0
        stop = int(newlines[i]) if i < n_lines - 1 else end
        if stop - start != 4 or not block.startswith(b"null", start):
            others.append(i)
        else:
            tombstones.append((i, start))
    return tombstones, others


def _offsets(first_offset: int, n_lines: int, dropped: list[int] | None = None) -> pa.Array:
    """Record offsets of a block's lines (int64, vectorised), without the lines at the ``dropped`` indices."""
    return pa.array(np.delete(np.arange(first_offset, first_offset + n_lines, dtype=np.int64), dropped or []))


def _without_tombstones(block: bytes, tombstones: list[tuple[int, int]]) -> bytes:
    view = memoryview(block)
    parts = []
    at = 0
    for _, start in tombstones:
        parts.append(view[at:start])
        at = start + 5  # "null" and its newline (the last line's may be missing: slicing past the end is empty)
    parts.append(view[at:])
    return b"".join(parts)


def fast_block(
    parser: LineParser,
    block: bytes,
    n_lines: int,
    kafka_partition: int,
    first_offset: int,
    source_file: str,
    schema: pa.Schema,
    newlines: np.ndarray | None = None,
) -> tuple[pa.Table, int, int] | None:
    """:func:`fast_rows` of a whole block of ``n_lines`` newline-separated lines, without splitting it into lines.

    ``newlines``: the block's :func:`newline_positions`, when the reader found them already.
    """
    tombstones = object_lines(block, n_lines, newlines)
    if tombstones is None:
        return None
    n = n_lines - len(tombstones)
    if not n:
        return None
    # Kafka tombstones (exactly `null`, as the connector writes them) are counted, never stored.
    offsets = _offsets(first_offset, n_lines, [i for i, _ in tombstones])
    if tombstones:
        block = _without_tombstones(block, tombstones)
    if not block.isascii():
        try:
            block.decode("utf-8")  # Arrow does not validate UTF-8 in strings
        except UnicodeDecodeError:
            return None
    try:
        tbl = pj.read_json(pa.BufferReader(block), read_options=READ_OPTIONS, parse_options=parse_options(parser))
        if tbl.num_rows != n:
            return None
        encodings, default = json_encodings(parser)
        rows, _, late = vector_rows(
            parser, tbl.combine_chunks(), encodings, default, offsets, kafka_partition, source_file, schema, strict=True
        )
    except (Decline, pa.ArrowInvalid):
        return None
    return rows, late, len(tombstones)


def _column(tbl: pa.Table, name: str) -> pa.Array:
    if name not in tbl.column_names:
        return pa.nulls(tbl.num_rows)
    col = tbl.column(name)
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def _child(parent: pa.Array, name: str) -> pa.Array:
    """A struct's field, parent nulls propagated (unlike StructArray.field); nulls when it has no such field."""
    if pa.types.is_struct(parent.type) and parent.type.get_field_index(name) >= 0:
        return pc.struct_field(parent, name)
    return pa.nulls(len(parent))


def _np(mask: Any) -> np.ndarray:
    """A boolean Arrow mask as numpy, nulls false."""
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), bool)


def _in_i53(values: pa.Array) -> np.ndarray:
    return _np(pc.and_(pc.greater_equal(values, -I53), pc.less(values, I53)))


def vector_rows(
    parser: LineParser,
    tbl: pa.Table,
    encodings: dict[str, Encoding],
    default: Encoding,
    offsets: pa.Array,
    kafka_partition: int,
    source_file: str,
    schema: pa.Schema,
    strict: bool = False,
) -> tuple[pa.Table, np.ndarray | None, int]:
    """(rows of ``schema`` of the records proven to give exactly the line parser's rows, which records those are
    (None: all), late count). Raises Decline for types it does not read, or (``strict``) unless it takes them all.

    ``tbl``: records read by Arrow (CDC: ``op``, ``source``, ``ts_ms``, ``before``, ``after``; else the row's
    columns); ``offsets``: theirs. A row column the table lacks is taken only when null: the line parser evolves
    the table with it. ``encodings`` (else ``default``): what each column's values are beyond their Arrow type.
    """
    n = tbl.num_rows
    ok = np.ones(n, bool)
    cols: dict[str, Any] = {}
    key_name = parser.key
    string_key = parser.key_kind == K_STRING
    key_type = pa.string() if string_key else pa.int64()
    if parser.cdc:
        op, source, conn = _column(tbl, "op"), _column(tbl, "source"), _column(tbl, "ts_ms")
        lsn, ts_ms, tx = (_child(source, name) for name in ("lsn", "ts_ms", "txId"))
        if not pa.types.is_string(op.type) or not all(
            pa.types.is_integer(a.type) or pa.types.is_null(a.type) for a in (lsn, ts_ms, tx, conn)
        ):
            raise Decline
        lsn, ts_ms, tx, conn = (a.cast(pa.int64()) for a in (lsn, ts_ms, tx, conn))
        ok &= _np(pc.is_in(op, value_set=_OPS)) & _in_i53(ts_ms) & _np(pc.is_valid(lsn))
        before, after = _column(tbl, "before"), _column(tbl, "after")
        is_delete = _np(pc.equal(op, "d"))
        has_after = _np(pc.is_valid(after))
        # Deletes: the key from before, no values; the others: the row from after.
        ok &= np.where(is_delete, _np(pc.is_valid(before)), has_after)
        key = typed(parser.key_kind, _child(after, key_name))[0].cast(key_type)
        deletes = pa.array(is_delete) if is_delete.any() else None
        if deletes is not None:
            key = pc.if_else(deletes, typed(parser.key_kind, _child(before, key_name))[0].cast(key_type), key)
        masked = deletes is not None and bool((is_delete & has_after).any())  # a delete normally has no after
        for name, kind in parser.columns:
            if name != key_name:
                values, good = typed(kind, _child(after, name), encodings.get(name, default))
                if good is not None:
                    ok &= good | is_delete
                cols[name] = pc.if_else(deletes, pa.nulls(n, values.type), values) if masked else values
        unknown = [f.name for f in after.type if f.name not in parser.known] if pa.types.is_struct(after.type) else []
        for name in unknown:
            ok &= is_delete | ~_np(pc.is_valid(_child(after, name)))
        conn_ok = pa.array(_in_i53(conn))  # else null, as the line parser reads an out-of-range ts_ms
        connector_us = pc.multiply(pc.if_else(conn_ok, conn, pa.nulls(n, pa.int64())), 1000)
        event_us = pc.multiply(pc.fill_null(ts_ms, 0), 1000)
    else:
        for name, kind in parser.columns:
            values, good = typed(kind, _column(tbl, name), encodings.get(name, default))
            if good is not None:
                ok &= good
            cols[name] = values
        for name in tbl.column_names:
            if name not in parser.known:
                ok &= ~_np(pc.is_valid(_column(tbl, name)))
        key = cols[key_name].cast(key_type)
        event_us = cols[PLAIN_EVENT_TIME_COLUMN]
        ok &= _np(pc.is_valid(event_us))
    ok &= _np(pc.is_valid(key))
    if string_key:
        ok &= _np(pc.greater(pc.binary_length(key), 0))
    taken = None if ok.all() else ok
    if taken is not None:
        if strict:
            raise Decline
        keep = pa.array(ok)
        key, event_us, offsets = pc.filter(key, keep), pc.filter(event_us, keep), pc.filter(offsets, keep)
        cols = {name: pc.filter(v, keep) for name, v in cols.items()}
        if parser.cdc:
            op, lsn, tx, connector_us = (pc.filter(a, keep) for a in (op, lsn, tx, connector_us))
    m = len(key)
    topic = parser.topic
    key_text = key if string_key else key.cast(pa.string())
    if parser.cdc:
        id_text = pc.binary_join_element_wise(topic, key_text, lsn.cast(pa.string()), op, IDENTITY_SEPARATOR)
        cols.update(_op=op, _lsn=lsn, _tx_id=tx, _connector_ts=connector_us)
    else:
        id_text = pc.binary_join_element_wise(topic, key_text, IDENTITY_SEPARATOR)
    is_late = pc.less(event_us, parser.late_before_us)
    gap = pc.subtract_checked(pa.scalar(parser.arrival_us, pa.int64()), event_us)
    cols[key_name] = key
    cols.update(
        _topic=pa.repeat(pa.scalar(topic, pa.string()), m),
        _kafka_partition=pa.repeat(pa.scalar(kafka_partition, pa.int32()), m),
        _offset=offsets,
        _source_file=pa.repeat(pa.scalar(source_file, pa.string()), m),
        _event_id=event_ids(id_text),
        _event_time=event_us,
        _arrival_hour=pa.repeat(pa.scalar(parser.arrival_us, pa.int64()), m),
        _is_late=is_late,
        _lateness_seconds=pc.if_else(pc.greater(gap, 0), pc.divide(gap, 1_000_000), 0),
    )
    arrays = [cols[f.name].cast(f.type) if f.name in cols else pa.nulls(m, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema), taken, int(pc.sum(is_late).as_py() or 0)
