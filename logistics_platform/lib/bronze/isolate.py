"""The clean path for a block with a few lines it cannot take: those lines are found and set apart, the rest is
vectorised.

:func:`~logistics_platform.lib.bronze.fastpath.fast_block` takes a block whole or declines it, so one bad line
would send all of its block line by line. :func:`fast_block_isolating` instead returns the block's rows without
the lines it cannot prove, and those lines (index and bytes) for the per-line parser, which stays the source of
truth for them. A line is set apart when:

- it is not exactly one ``{...}`` nor a tombstone (the layout scan of ``fastpath.odd_lines``);
- it holds bytes that are not UTF-8 (the line of each decoding error);
- Arrow's JSON reader fails on it: a parse error names its row (``... in row N``); an error without a row (a
  number that does not convert to int64) or more rows than lines (two objects on one line) are narrowed down
  by halving the lines read, down to single lines;
- it has a non-null value in a field the explicit schema does not declare (a schema/payload envelope, a column
  the table lacks, a field Debezium added): read as inferred columns and looked up per row;
- :func:`fastpath.vector_rows` does not take its row (op, source, key, values in the forms it reads).

The lines of the block not set apart go to one JSON read; a bad line costs at most one more read of the lines
in front of it. Offsets are those of the lines in the file, so bronze and quarantine rows are the same as the
per-line parser's for every line (tests/bronze/test_fastpath.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from logistics_platform.lib.bronze.envelope import LineParser
from logistics_platform.lib.bronze.fastpath import (
    READ_OPTIONS,
    TEXT_KINDS,
    json_encodings,
    newline_positions,
    odd_lines,
    parse_options,
    vector_rows,
)
from logistics_platform.lib.bronze.values import K_STRING, K_TEXT_OR_JSON, Decline

_PART_ROWS = 1024  # after a failed read of a whole block, its rows are read in parts of about this many
_WRAPPED = b'"schema":'
_WRAPPED_BYTES = np.frombuffer(_WRAPPED, np.uint8)
_TYPE_CHANGE = ") changed from "  # the reader's error for a value of another JSON type than the schema's
_ERROR_ROW = re.compile(r" in row (\d+)$")
_INFER: dict[tuple[Any, ...], pj.ParseOptions] = {}


@dataclass
class Isolated:
    """A block read by the clean path but for some lines: its rows, and the lines left for the per-line parser."""

    rows: pa.Table | None  # None: every line was set apart
    late: int
    tombstones: int
    lines: list[tuple[int, bytes]]  # (index in the block, the line) of each line set apart, in block order


def _infer_options(parser: LineParser) -> pj.ParseOptions:
    """The clean path's schema, undeclared fields read as inferred columns (so that the reader names their rows)."""
    key = (parser.spec.table, tuple(parser.columns))
    opts = _INFER.get(key)
    if opts is None:
        schema = parse_options(parser).explicit_schema
        opts = _INFER[key] = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
    return opts


def _undeclared(arr: Any, declared: pa.DataType, n: int) -> np.ndarray | None:
    """Rows of a struct array (or table) with a non-null value in a field ``declared`` lacks; None if it has none."""
    names = arr.column_names if isinstance(arr, pa.Table) else [f.name for f in arr.type]
    flagged: np.ndarray | None = None
    for name in names:
        child = arr.column(name).combine_chunks() if isinstance(arr, pa.Table) else pc.struct_field(arr, name)
        index = declared.get_field_index(name)
        bad: np.ndarray | None
        if index < 0:
            bad = np.asarray(pc.is_valid(child).to_numpy(zero_copy_only=False), bool)
        elif pa.types.is_struct(declared.field(index).type) and child.type != declared.field(index).type:
            bad = _undeclared(child, declared.field(index).type, n)
        else:
            continue
        if bad is not None:
            flagged = bad if flagged is None else flagged | bad
    return flagged if flagged is not None else np.zeros(n, bool)


def _conform(arr: Any, declared: pa.DataType) -> Any:
    """``arr`` (a table or struct array) with only the fields ``declared`` has, in its order."""
    children = []
    for f in declared:
        child = arr.column(f.name).combine_chunks() if isinstance(arr, pa.Table) else pc.struct_field(arr, f.name)
        children.append(_conform(child, f.type) if pa.types.is_struct(f.type) and child.type != f.type else child)
    if isinstance(arr, pa.Table):
        return pa.Table.from_arrays(children, schema=pa.schema(list(declared)))
    return pa.StructArray.from_arrays(children, fields=list(declared), mask=pc.is_null(arr))


def _joined(
    block: bytes, starts: np.ndarray, stops: np.ndarray, lines: np.ndarray
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The ``lines`` of a block joined by newlines (one copy), and where each starts and stops in the result."""
    lengths = stops[lines] - starts[lines]
    row_starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    return _join_runs(block, starts, stops, lines), row_starts, row_starts + lengths


def _join_runs(data: bytes, starts: np.ndarray, stops: np.ndarray, lines: np.ndarray) -> bytes:
    """The ``lines`` (ascending) of ``data`` joined by newlines: one slice per run of consecutive lines."""
    view = memoryview(data)
    breaks = np.flatnonzero(np.diff(lines) != 1) + 1
    firsts = lines[np.concatenate(([0], breaks))]
    lasts = lines[np.append(breaks - 1, len(lines) - 1)]
    return b"\n".join(view[s:e] for s, e in zip(starts[firsts].tolist(), stops[lasts].tolist(), strict=True))


def _suspect_pattern(parser: LineParser) -> str:
    """RE2 for a line holding a row column's value of another JSON type than the reader's (a decimal as a number,
    a timestamp as epoch micros, a number as text): the reader would fail on it."""
    text = [n for n, k in parser.columns if k in (K_STRING, K_TEXT_OR_JSON, *TEXT_KINDS)]
    other = [n for n, k in parser.columns if n not in text]
    parts = []
    if text:
        parts.append(f'"(?:{"|".join(map(re.escape, text))})":\\s*[^"n\\s]')
    if other:
        parts.append(f'"(?:{"|".join(map(re.escape, other))})":\\s*"')
    return "|".join(parts)


def _suspects(parser: LineParser, buffer: bytes, row_starts: np.ndarray, row_stops: np.ndarray) -> np.ndarray:
    """Per row of a joined buffer, whether :func:`_suspect_pattern` finds something on it (RE2, one pass)."""
    n = len(row_starts)
    offsets = np.append(row_starts, row_stops[-1]).astype(np.int32)
    lines = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(buffer)])
    return np.asarray(pc.match_substring_regex(lines, _suspect_pattern(parser)).to_numpy(zero_copy_only=False), bool)


class _Reader:
    """Reads rows (lines kept, joined in one buffer) with Arrow, setting apart the lines it fails on."""

    def __init__(self, buffer: bytes, starts: np.ndarray, stops: np.ndarray, opts: pj.ParseOptions, budget: int):
        self.buffer, self.starts, self.stops, self.opts = buffer, starts, stops, opts
        self.budget = budget  # reads left: a block with many bad lines goes the old way
        self.failed: list[int] = []  # rows set apart
        self.error = ""  # the reader's last error

    def _gather(self, rows: np.ndarray) -> Any:
        if rows[-1] - rows[0] == len(rows) - 1:  # consecutive: a slice, no copy
            return memoryview(self.buffer)[self.starts[rows[0]] : self.stops[rows[-1]]]
        return _join_runs(self.buffer, self.starts, self.stops, rows)

    def read(self, rows: np.ndarray, whole: bool = False) -> Any:
        """(table, its rows) pieces of ``rows`` (ascending), each piece's rows consecutive among those read.

        ``whole``: one read only, None if it fails (nothing is set apart).
        """
        pieces: list[tuple[pa.Table, np.ndarray]] = []
        pending: list[np.ndarray] = []  # rows in front of a bad line: read together at the end
        while len(rows):
            self.budget -= 1
            if self.budget < 0:
                raise Decline
            data = self._gather(rows)
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
    """:func:`fastpath.fast_block` of a block but for the lines it cannot take, which are returned to be parsed
    line by line; None: the block goes the old way (its layout is not as described, or too many reads)."""
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
    if len(lines) == n_lines:
        buffer, row_starts, row_stops = block, starts, stops
    elif len(lines):
        buffer, row_starts, row_stops = _joined(block, starts, stops, lines)
    declared = parse_options(parser).explicit_schema
    rows_table: pa.Table | None = None
    late = 0
    if len(lines):
        reader = _Reader(buffer, row_starts, row_stops, _infer_options(parser), 8 + n_lines // 4)
        try:
            pieces = reader.read(np.arange(len(lines)), whole=True)
            if pieces is None:
                # A value of another JSON type than its column's: the lines holding one are found in one pass and
                # set apart. The rest is read in parts, so that a bad line found by reading costs a re-read of its
                # part only.
                if _TYPE_CHANGE in reader.error:
                    suspect = _suspects(parser, buffer, row_starts, row_stops)
                else:
                    suspect = np.zeros(len(lines), bool)
                if suspect.any():
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
                if flagged is not None and flagged.any():
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
