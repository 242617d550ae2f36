"""Vectorised clean path of the bronze line parser: a block of lines decoded and typed by Arrow at C speed.

:class:`~logistics_platform.lib.bronze.envelope.LineParser` stays the source of truth: :func:`fast_block` takes a
block only when every line of it is proven to give exactly the line parser's row, :func:`fast_block_isolating` sets
apart the lines it cannot prove for the line parser, and :func:`vector_rows` builds the rows of Arrow-read records
(also for Avro files). What is declined and why: docs/internals/parsers.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
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
    K_INT,
    K_LONG,
    K_STRING,
    K_TEXT_OR_JSON,
    K_TIMESTAMP,
    Decline,
    Encoding,
    event_ids,
    typed,
)

# An evolved string column (K_TEXT_OR_JSON) is read strictly as a string here: other JSON values go line by line.
_JSON_TYPE = {K_STRING: pa.string(), K_TEXT_OR_JSON: pa.string(), K_DOUBLE: pa.float64(), K_BOOL: pa.bool_()}
_JSON_TYPE |= {K_LONG: pa.int64(), K_INT: pa.int64()}  # an int column's values beyond 32 bits promote it
TEXT_KINDS = (K_DECIMAL, K_TIMESTAMP)  # read as text, then checked against the canonical form before any cast
# Debezium's source block (3.x adds ts_us, ts_ns, origin, origin_lsn): any value of the declared type is fine.
_SOURCE_INTS = ("ts_ms", "txId", "lsn", "xmin", "ts_us", "ts_ns", "origin_lsn")
_SOURCE_NAMES = "version connector name ts_ms snapshot db sequence schema table txId lsn xmin ts_us ts_ns origin"
_SOURCE_FIELDS = [(n, pa.int64() if n in _SOURCE_INTS else pa.string()) for n in [*_SOURCE_NAMES.split(), "origin_lsn"]]
# The envelope's transaction block (Debezium's provide.transaction.metadata), null nearly always.
_TRANSACTION = pa.struct([("id", pa.string()), ("total_order", pa.int64()), ("data_collection_order", pa.int64())])
# The envelope's fields besides before and after (3.x adds ts_us and ts_ns).
_ENVELOPE = [("source", pa.struct(_SOURCE_FIELDS)), ("op", pa.string()), ("ts_ms", pa.int64()), ("ts_us", pa.int64())]
_ENVELOPE += [("ts_ns", pa.int64()), ("transaction", _TRANSACTION)]
_OPS = pa.array(["c", "u", "d", "r"])
_NL, _OPEN, _CLOSE = 0x0A, 0x7B, 0x7D
READ_OPTIONS = pj.ReadOptions(use_threads=False, block_size=1 << 26)
_PART_ROWS = 1024  # after a failed read of a whole block, its rows are read in parts of about this many
_WRAPPED = b'"schema":'
_WRAPPED_BYTES = np.frombuffer(_WRAPPED, np.uint8)
_TYPE_CHANGE = ") changed from "  # the reader's error for a value of another JSON type than the schema's
_ERROR_ROW = re.compile(r" in row (\d+)$")
Joined = bytes | memoryview  # lines joined by newlines: a copy, or a slice of the block


def parse_options(parser: LineParser, unexpected: str = "error") -> pj.ParseOptions:
    """The JSON reader's explicit schema for a parser's lines (decimals and timestamps read as text, whatever the
    decimal mode); ``unexpected="infer"``: undeclared fields read as inferred columns (the reader names their rows)."""
    return _parse_options(parser.cdc, tuple(parser.columns), unexpected)


@cache
def _parse_options(cdc: bool, columns: tuple[tuple[str, str], ...], unexpected: str) -> pj.ParseOptions:
    row = pa.struct([(n, pa.string() if k in TEXT_KINDS else _JSON_TYPE[k]) for n, k in columns])
    schema = pa.schema([("before", row), ("after", row), *_ENVELOPE] if cdc else list(row))
    return pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior=unexpected)


def json_encodings(parser: LineParser) -> tuple[dict[str, Encoding], Encoding]:
    """(per column, default) encodings of JSON lines without a schema block: the connector's decimal mode decides."""
    if parser.decimal_mode != DECIMAL_PRECISE:
        return {}, Encoding(None)
    return {name: Encoding(scale) for name, scale in parser.scales.items()}, Encoding()


def newline_positions(block: bytes) -> np.ndarray:
    """Byte positions of the newlines between a block's lines (a last newline ends the last line: not listed)."""
    end = len(block) - 1 if block.endswith(b"\n") else len(block)
    return np.flatnonzero(np.frombuffer(block, np.uint8, end) == _NL)


def odd_lines(block: bytes, n_lines: int, newlines: np.ndarray) -> tuple[list[tuple[int, int]], list[int]] | None:
    """The lines of a block (with its :func:`newline_positions`) that are not ``{...}``: (line index, byte position)
    of each tombstone (``null``), and the indices of the others; None when the block is not ``n_lines`` lines or its
    first or last line is empty. Vectorised over the lines; only the odd ones are looked at one by one."""
    end = len(block) - 1 if block.endswith(b"\n") else len(block)
    if n_lines < 1 or end < 1:
        return None
    data = np.frombuffer(block, np.uint8, end)
    if data[0] == _NL or data[end - 1] == _NL:
        return None  # an empty first or last line (and no byte on one side of that newline)
    if len(newlines) != n_lines - 1:
        return None  # not the block described
    starts, stops = np.concatenate(([0], newlines + 1)), np.append(newlines, end)
    # Odd: a first byte not {, or a last byte not } (an empty line's are the newlines around it).
    odd = np.flatnonzero((data[starts] != _OPEN) | (data[stops - 1] != _CLOSE))
    tombstones: list[tuple[int, int]] = []
    others: list[int] = []
    for i, start, stop in zip(odd.tolist(), starts[odd].tolist(), stops[odd].tolist(), strict=True):
        if stop - start == 4 and block.startswith(b"null", start):
            tombstones.append((i, start))
        else:
            others.append(i)
    return tombstones, others


def fast_block(
    parser: LineParser,
    block: bytes,
    n_lines: int,
    kafka_partition: int,
    first_offset: int,
    source_file: str,
    schema: pa.Schema,
) -> tuple[pa.Table, int, int] | None:
    """(rows of ``schema``, late count, tombstones) of a block of ``n_lines`` lines, or None unless the clean path takes
    every line: parse them line by line."""
    iso = fast_block_isolating(parser, block, n_lines, kafka_partition, first_offset, source_file, schema)
    return None if iso is None or iso.lines or iso.rows is None else (iso.rows, iso.late, iso.tombstones)


def _column(arr: Any, name: str) -> pa.Array:
    """A table's column or a struct array's field (parent nulls propagated, unlike StructArray.field); nulls when it
    has no such column or field."""
    if isinstance(arr, pa.Table):
        if name not in arr.column_names:
            return pa.nulls(arr.num_rows)
        col = arr.column(name)
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if pa.types.is_struct(arr.type) and arr.type.get_field_index(name) >= 0:
        return pc.struct_field(arr, name)
    return pa.nulls(len(arr))


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
) -> tuple[pa.Table, np.ndarray | None, int]:
    """(rows of ``schema`` of the Arrow-read records proven to give exactly the line parser's rows, which records those
    are (None: all), late count); raises Decline for types it does not read. ``encodings`` (else ``default``): what
    each column's values are beyond their Arrow type. A column the table lacks is taken only when null."""
    n = tbl.num_rows
    ok = np.ones(n, bool)
    cols: dict[str, Any] = {}
    key_name = parser.key
    string_key = parser.key_kind == K_STRING
    key_type = pa.string() if string_key else pa.int64()
    row, names = tbl, tbl.column_names  # where the row's columns are (CDC: in each record's after), and their names
    is_delete, deletes, masked = np.zeros(n, bool), None, False
    if parser.cdc:
        op, source, conn = _column(tbl, "op"), _column(tbl, "source"), _column(tbl, "ts_ms")
        lsn, ts_ms, tx = (_column(source, name) for name in ("lsn", "ts_ms", "txId"))
        if not pa.types.is_string(op.type) or not all(
            pa.types.is_integer(a.type) or pa.types.is_null(a.type) for a in (lsn, ts_ms, tx, conn)
        ):
            raise Decline
        lsn, ts_ms, tx, conn = (a.cast(pa.int64()) for a in (lsn, ts_ms, tx, conn))
        ok &= _np(pc.is_in(op, value_set=_OPS)) & _in_i53(ts_ms) & _np(pc.is_valid(lsn))
        before, row = _column(tbl, "before"), _column(tbl, "after")
        names = [f.name for f in row.type] if pa.types.is_struct(row.type) else []
        is_delete = _np(pc.equal(op, "d"))
        has_after = _np(pc.is_valid(row))
        # Deletes: the key from before, no values; the others: the row from after.
        ok &= np.where(is_delete, _np(pc.is_valid(before)), has_after)
        deletes = pa.array(is_delete) if is_delete.any() else None
        masked = deletes is not None and bool((is_delete & has_after).any())  # a delete normally has no after
        conn_ok = pa.array(_in_i53(conn))  # else null, as the line parser reads an out-of-range ts_ms
        connector_us = pc.multiply(pc.if_else(conn_ok, conn, pa.nulls(n, pa.int64())), 1000)
        event_us = pc.multiply(pc.fill_null(ts_ms, 0), 1000)
        cols.update(_op=op, _lsn=lsn, _tx_id=tx, _connector_ts=connector_us)
    for name, kind in parser.columns:
        values, good = typed(kind, _column(row, name), encodings.get(name, default))
        if good is not None:
            ok &= good | is_delete
        cols[name] = pc.if_else(deletes, pa.nulls(n, values.type), values) if masked else values
    for name in names:
        if name not in parser.known:
            ok &= is_delete | ~_np(pc.is_valid(_column(row, name)))
    key = cols[key_name].cast(key_type)
    if deletes is not None:
        key = pc.if_else(deletes, typed(parser.key_kind, _column(before, key_name))[0].cast(key_type), key)
    if not parser.cdc:
        event_us = cols[PLAIN_EVENT_TIME_COLUMN]
        ok &= _np(pc.is_valid(event_us))
    ok &= _np(pc.is_valid(key))
    if string_key:
        ok &= _np(pc.greater(pc.binary_length(key), 0))
    cols.update({key_name: key, "_offset": offsets, "_event_time": event_us})
    taken = None if ok.all() else ok
    if taken is not None:
        keep = pa.array(ok)
        cols = {name: pc.filter(v, keep) for name, v in cols.items()}
    key, event_us = cols[key_name], cols["_event_time"]
    m = len(key)
    key_text = key if string_key else key.cast(pa.string())
    identity = (key_text, cols["_lsn"].cast(pa.string()), cols["_op"]) if parser.cdc else (key_text,)
    is_late = pc.less(event_us, parser.late_before_us)
    gap = pc.subtract_checked(pa.scalar(parser.arrival_us, pa.int64()), event_us)
    cols.update(
        _topic=pa.repeat(pa.scalar(parser.topic, pa.string()), m),
        _kafka_partition=pa.repeat(pa.scalar(kafka_partition, pa.int32()), m),
        _source_file=pa.repeat(pa.scalar(source_file, pa.string()), m),
        _event_id=event_ids(pc.binary_join_element_wise(parser.topic, *identity, IDENTITY_SEPARATOR)),
        _arrival_hour=pa.repeat(pa.scalar(parser.arrival_us, pa.int64()), m),
        _is_late=is_late,
        _lateness_seconds=pc.if_else(pc.greater(gap, 0), pc.divide(gap, 1_000_000), 0),
    )
    arrays = [cols[f.name].cast(f.type) if f.name in cols else pa.nulls(m, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema), taken, int(pc.sum(is_late).as_py() or 0)


@dataclass
class Isolated:
    """A block read by the clean path but for some lines: its rows, and the lines left for the per-line parser."""

    rows: pa.Table | None  # None: every line was set apart
    late: int
    tombstones: int
    lines: list[tuple[int, bytes]]  # (index in the block, the line) of each line set apart, in block order


def _undeclared(arr: Any, declared: pa.DataType, n: int) -> np.ndarray:
    """Rows of a struct array (or table) with a non-null value in a field ``declared`` lacks."""
    flagged = np.zeros(n, bool)
    for name in arr.column_names if isinstance(arr, pa.Table) else [f.name for f in arr.type]:
        child, index = _column(arr, name), declared.get_field_index(name)
        if index < 0:
            flagged |= _np(pc.is_valid(child))
        elif pa.types.is_struct(declared.field(index).type) and child.type != declared.field(index).type:
            flagged |= _undeclared(child, declared.field(index).type, n)
    return flagged


def _conform(arr: Any, declared: pa.DataType) -> Any:
    """``arr`` (a table or struct array) with only the fields ``declared`` has, in its order."""
    children = []
    for f in declared:
        child = _column(arr, f.name)
        children.append(_conform(child, f.type) if pa.types.is_struct(f.type) and child.type != f.type else child)
    if isinstance(arr, pa.Table):
        return pa.Table.from_arrays(children, schema=pa.schema(list(declared)))
    return pa.StructArray.from_arrays(children, fields=list(declared), mask=pc.is_null(arr))


def _joined(
    block: bytes, starts: np.ndarray, stops: np.ndarray, lines: np.ndarray
) -> tuple[Joined, np.ndarray, np.ndarray]:
    """The ``lines`` of a block joined by newlines (:func:`_join_runs`), and where each starts and stops in it."""
    lengths = stops[lines] - starts[lines]
    row_starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    return _join_runs(block, starts, stops, lines), row_starts, row_starts + lengths


def _join_runs(data: Joined, starts: np.ndarray, stops: np.ndarray, lines: np.ndarray) -> Joined:
    """The ``lines`` (ascending) of ``data`` joined by newlines: one slice per run of consecutive lines, joined in one
    copy (one run: the slice itself, no copy)."""
    view = memoryview(data)
    breaks = np.flatnonzero(np.diff(lines) != 1) + 1
    firsts = starts[lines[np.concatenate(([0], breaks))]].tolist()
    lasts = stops[lines[np.append(breaks - 1, len(lines) - 1)]].tolist()
    if len(firsts) == 1:
        return view[firsts[0] : lasts[0]]
    return b"\n".join(view[s:e] for s, e in zip(firsts, lasts, strict=True))


def _suspects(parser: LineParser, buffer: Joined, row_starts: np.ndarray, row_stops: np.ndarray) -> np.ndarray:
    """Per row of a joined buffer, whether it holds a row column's value of another JSON type than the reader's (a
    decimal as a number, a timestamp as epoch micros, a number as text): the reader would fail on it (RE2, one pass)."""
    text = [n for n, k in parser.columns if k in (K_STRING, K_TEXT_OR_JSON, *TEXT_KINDS)]
    other = [n for n, k in parser.columns if n not in text]
    parts = []
    if text:
        parts.append(f'"(?:{"|".join(map(re.escape, text))})":\\s*[^"n\\s]')
    if other:
        parts.append(f'"(?:{"|".join(map(re.escape, other))})":\\s*"')
    offsets = np.append(row_starts, row_stops[-1]).astype(np.int32)
    lines = pa.Array.from_buffers(pa.string(), len(row_starts), [None, pa.py_buffer(offsets), pa.py_buffer(buffer)])
    return np.asarray(pc.match_substring_regex(lines, "|".join(parts)).to_numpy(zero_copy_only=False), bool)


class _Reader:
    """Reads rows (lines kept, joined in one buffer) with Arrow, setting apart the lines it fails on."""

    def __init__(self, buffer: Joined, starts: np.ndarray, stops: np.ndarray, opts: pj.ParseOptions, budget: int):
        self.buffer, self.starts, self.stops, self.opts = buffer, starts, stops, opts
        self.budget = budget  # reads left: a block with many bad lines goes the old way
        self.failed: list[int] = []  # rows set apart
        self.error = ""  # the reader's last error

    def read(self, rows: np.ndarray, whole: bool = False) -> Any:
        """(table, its rows) pieces of ``rows`` (ascending); ``whole``: one read only, None if it fails."""
        pieces: list[tuple[pa.Table, np.ndarray]] = []
        pending: list[np.ndarray] = []  # rows in front of a bad line: read together at the end
        while len(rows):
            self.budget -= 1
            if self.budget < 0:
                raise Decline
            data = _join_runs(self.buffer, self.starts, self.stops, rows)
            tbl = None
            try:
                tbl = pj.read_json(pa.BufferReader(data), read_options=READ_OPTIONS, parse_options=self.opts)
            except pa.ArrowInvalid as e:
                self.error = str(e)
                m = _ERROR_ROW.search(self.error)
                # One read block (the reader numbers rows per block): the row is the line.
                row = int(m.group(1)) if m and len(data) <= READ_OPTIONS.block_size else -1
                if 0 <= row < len(rows) and not whole:
                    self.failed.append(int(rows[row]))
                    if row:
                        pending.append(rows[:row])
                    rows = rows[row + 1 :]
                    continue
            if tbl is not None and tbl.num_rows == len(rows):
                pieces.append((tbl, rows))
                break
            if whole:
                return None
            if len(rows) == 1:
                self.failed.append(int(rows[0]))
                break
            half = len(rows) // 2  # no row to go by: halve
            pieces += self.read(rows[:half])
            rows = rows[half:]
        if pending:
            pieces += self.read(np.concatenate(pending))
        return pieces


def fast_block_isolating(
    parser: LineParser,
    block: bytes,
    n_lines: int,
    kafka_partition: int,
    first_offset: int,
    source_file: str,
    schema: pa.Schema,
    newlines: np.ndarray | None = None,
) -> Isolated | None:
    """:func:`fast_block` of a block but for the lines it cannot take, returned to be parsed line by line; None: the
    block goes the old way (its layout is not as described, or too many reads)."""
    if newlines is None:
        newlines = newline_positions(block)
    layout = odd_lines(block, n_lines, newlines)
    if layout is None:
        return None
    tombstones, others = layout
    end = len(block) - 1 if block.endswith(b"\n") else len(block)
    starts = np.concatenate(([0], newlines + 1))
    stops = np.append(newlines, end)
    keep = np.ones(n_lines, bool)
    keep[[i for i, _ in tombstones]] = False
    apart = set(others)
    # A schema/payload envelope (JsonConverter's schemas.enable) is read by the per-line parser: the reader would
    # infer its schema block's types, several times the cost of parsing it line by line.
    if n_lines > 1 and len(block) > starts[-1] + len(_WRAPPED):
        heads = np.frombuffer(block, np.uint8)[starts[:, None] + np.arange(1, len(_WRAPPED) + 1)]
        apart.update(np.flatnonzero((heads == _WRAPPED_BYTES).all(axis=1)).tolist())
    if not block.isascii():
        # Arrow does not validate UTF-8 in strings: each line with a byte above 0x7F is decoded on its own.
        high = np.flatnonzero(np.frombuffer(block, np.uint8) >= 0x80)
        view = memoryview(block)
        for line in np.unique(np.searchsorted(newlines, high)).tolist():
            try:
                str(view[starts[line] : stops[line]], "utf-8")
            except UnicodeDecodeError:
                apart.add(line)
    keep[list(apart)] = False
    lines = np.flatnonzero(keep)
    declared = parse_options(parser).explicit_schema
    rows_table: pa.Table | None = None
    late = 0
    if len(lines):
        buffer, row_starts, row_stops = _joined(block, starts, stops, lines)
        reader = _Reader(buffer, row_starts, row_stops, parse_options(parser, "infer"), 8 + n_lines // 4)
        try:
            pieces = reader.read(np.arange(len(lines)), whole=True)
            if pieces is None:
                # A value of another JSON type than its column's: such lines are found in one pass and set apart,
                # the rest read in parts (a bad line found by reading costs a re-read of its part only).
                if _TYPE_CHANGE in reader.error and (suspect := _suspects(parser, buffer, row_starts, row_stops)).any():
                    apart.update(lines[suspect].tolist())
                    lines = lines[~suspect]
                    if len(lines):
                        buffer, row_starts, row_stops = _joined(block, starts, stops, lines)
                    reader = _Reader(buffer, row_starts, row_stops, reader.opts, reader.budget)
                pieces = []
                for part in np.array_split(np.arange(len(lines)), max(1, len(lines) // _PART_ROWS)):
                    pieces += reader.read(part) if len(part) else []
        except Decline:
            return None
        apart.update(lines[np.asarray(reader.failed, np.int64)].tolist())
        tables, kept = [], []
        for tbl, rows in sorted(pieces, key=lambda p: int(p[1][0])):
            if tbl.schema != declared:  # undeclared fields: their rows set apart, the rest read as declared
                flagged = _undeclared(tbl, pa.struct(list(declared)), tbl.num_rows)
                if flagged.any():
                    apart.update(lines[rows[flagged]].tolist())
                    tbl, rows = tbl.filter(pa.array(~flagged)), rows[~flagged]
                tbl = _conform(tbl, pa.struct(list(declared)))
            tables.append(tbl)
            kept.append(rows)
        if tables:  # none when every read part failed: all its lines are set apart
            tbl = (tables[0] if len(tables) == 1 else pa.concat_tables(tables)).combine_chunks()
            read = lines[np.concatenate(kept)]
            encodings, default = json_encodings(parser)
            offsets = pa.array(read.astype(np.int64) + first_offset)
            try:
                rows_table, taken, late = vector_rows(
                    parser, tbl, encodings, default, offsets, kafka_partition, source_file, schema
                )
            except (Decline, pa.ArrowInvalid):
                return None
            if taken is not None:  # the rows it does not take go to the line parser
                apart.update(read[~taken].tolist())
            if not rows_table.num_rows:
                rows_table = None
    out = [(i, bytes(memoryview(block)[starts[i] : stops[i]])) for i in sorted(apart)]
    return Isolated(rows_table, late, len(tombstones), out)
