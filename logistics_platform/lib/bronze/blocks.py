"""Blocks of whole lines, the unit of parallel work: read from a landing file (bounded memory), parsed into typed rows
and quarantine records by the vectorised clean path (:mod:`~logistics_platform.lib.bronze.fastpath`), the lines it
sets apart by :class:`~logistics_platform.lib.bronze.envelope.LineParser`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.types import IcebergType

from logistics_platform.lib.bronze.envelope import TOMBSTONE, LineParser, Rejected, Widen, raw_line_text
from logistics_platform.lib.bronze.fastpath import Isolated, fast_block, fast_block_isolating, newline_positions
from logistics_platform.lib.bronze.landing import ContentReader, CorruptFileError, LandingFile
from logistics_platform.lib.bronze.values import DECIMAL_PRECISE
from logistics_platform.lib.bronze.writer import rows_to_arrow

BLOCK_BYTES = 8 * 1024 * 1024  # lines are parsed in blocks of at most this size: the unit of parallel work
MIN_BLOCK_BYTES = 64 * 1024
# Lines per try of the vectorised clean path: one odd line sends only its run to the per-line parser.
FAST_RUN_LINES = 8192


@dataclass
class BlockResult:
    """What one block of lines of one file turned into."""

    rows: pa.Table | None = None
    quarantine: list[tuple[Any, ...]] = field(default_factory=list)
    lines: int = 0
    tombstones: int = 0
    late: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, Any] | None = None  # extras of the first line with columns the table lacks (nothing else set)
    wider: dict[str, IcebergType] = field(default_factory=dict)  # or columns to promote first (nothing else set)
    unknown_at: str = ""  # where the first line of either is
    whole_block: bool | None = None  # the clean path took the block whole (True), declined it (False), not tried
    fast_lines: int = 0  # lines the vectorised clean path took (the others went through LineParser)


@dataclass(frozen=True)
class BlockTask:
    """One block of whole lines of one landing file, with what parsing it needs (picklable)."""

    table: str
    hour: datetime
    lateness_seconds: int
    evolved: tuple[tuple[str, IcebergType], ...]
    arrow_schema: pa.Schema
    block: bytes
    kafka_partition: int
    first_offset: int
    relpath: str
    fast_run_lines: int = FAST_RUN_LINES  # runs of lines tried on the vectorised clean path; 0: per line only
    newlines: np.ndarray | None = None  # where the reader found the block's newlines (fastpath.newline_positions)
    decimal_mode: str = DECIMAL_PRECISE  # the connector's decimal.handling.mode (DEBEZIUM_DECIMAL_HANDLING_MODE)
    topic: str = ""  # the topic of a table outside the contract (the contract's are known by ``table``)
    renames: tuple[tuple[str, str], ...] = ()  # accepted renames: the source's column -> the contract column


class CorruptRead(Exception):
    """Where reading a damaged file stopped: raised by :func:`iter_counted_blocks` after its last complete line."""

    def __init__(self, f: LandingFile, error: CorruptFileError, offset: int, content_bytes: int, tail: bytes) -> None:
        self.file = f
        self.error = error
        self.offset = offset  # record offset the next line would have had: start offset + complete lines read
        self.content_bytes = content_bytes  # decompressed bytes of the complete lines read
        self.tail = tail  # the incomplete line in front of the damage
        super().__init__(str(error))

    @property
    def lines(self) -> int:
        """Complete lines read before the damage."""
        return self.offset - self.file.start_offset

    def detail(self) -> str:
        """The quarantine row's error detail: the error, where reading stopped, the file's size."""
        where = f"reading stopped after {self.lines} complete lines (at offset {self.offset}, content byte "
        where += f"{self.content_bytes}"
        if self.error.compressed_at is not None:
            where += f", compressed byte {self.error.compressed_at}"
        return f"{self.error.error}; {where}); file size {self.file.size} bytes"


def iter_counted_blocks(f: LandingFile, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[bytes, int, np.ndarray]]:
    """(block of whole lines, offset of its first line, its :func:`fastpath.newline_positions`) of one file; a damaged
    file yields its complete lines in front of the damage, then raises :class:`CorruptRead`."""
    offset = f.start_offset
    done = 0
    tail = b""
    # A plain file is read a block at a time (one read, no joining of smaller pieces).
    stream = ContentReader(f) if f.gzipped else ContentReader(f, block_bytes)
    while True:
        try:
            chunk = stream.read(block_bytes)
        except CorruptFileError as e:
            raise CorruptRead(f, e, offset, done, tail) from e
        if not chunk:
            if tail:
                yield tail, offset, newline_positions(tail)  # a last line without newline still counts
            return
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            tail += chunk
            continue
        # One copy at most: the previous tail and this chunk up to its last newline, joined.
        if cut == len(chunk):
            block = b"".join((tail, chunk)) if tail else chunk
        else:
            block = b"".join((tail, memoryview(chunk)[:cut]))
        tail = chunk[cut:]
        newlines = newline_positions(block)
        yield block, offset, newlines
        offset += len(newlines) + 1
        done += len(block)


def _parse_lines(
    parser: LineParser, lines: Iterator[tuple[int, bytes]], task: BlockTask, out: BlockResult, rows: list[Any]
) -> bool:
    """Parse (offset, line) pairs into ``rows`` and ``out``; False at a line with columns to add or to promote."""
    late_index = parser.column_names.index("_is_late")
    parse, part, rel, topic, hour_us = parser.parse, task.kafka_partition, task.relpath, parser.topic, parser.arrival_us
    add = rows.append
    for offset, raw in lines:
        res = parse(raw, part, offset, rel)
        if type(res) is list:
            if res[-1] is not None:
                out.unknown, out.unknown_at = res[-1], f"{rel}@{offset}"
                return False
            if res[late_index]:
                out.late += 1
            add(res)
        elif res is TOMBSTONE:
            out.tombstones += 1
        elif type(res) is Widen:
            out.wider, out.unknown_at = res.types, f"{rel}@{offset}"
            return False
        else:
            assert isinstance(res, Rejected)
            out.reasons[res.reason] = out.reasons.get(res.reason, 0) + 1
            text, enc = raw_line_text(raw)
            out.quarantine.append((topic, part, offset, rel, hour_us, res.reason, res.detail, text, enc))
    return True


def _with_isolated(task: BlockTask, parser: LineParser, iso: Isolated, n_lines: int) -> BlockResult:
    """The block's result from the clean path's rows and the lines it set apart, parsed line by line."""
    out = BlockResult(lines=n_lines, tombstones=iso.tombstones, late=iso.late, whole_block=True)
    out.fast_lines = n_lines - len(iso.lines)
    rows: list[Any] = []
    if not _parse_lines(parser, ((task.first_offset + i, raw) for i, raw in iso.lines), task, out, rows):
        return BlockResult(unknown=out.unknown, wider=out.wider, unknown_at=out.unknown_at, whole_block=True)
    out.rows = iso.rows
    if rows:
        parsed = rows_to_arrow(rows, task.arrow_schema)
        # The rows in block order (by offset: the lines parsed one by one among the clean path's rows).
        out.rows = parsed if iso.rows is None else pa.concat_tables([iso.rows, parsed]).sort_by("_offset")
    return out


def parse_block(task: BlockTask, parser: LineParser, whole_first: bool = True) -> BlockResult:
    """One block -> typed rows as Arrow, quarantine, counts. Unless ``task.fast_run_lines`` is 0, the whole block
    (if ``whole_first``) goes to the clean path with its odd lines set apart; if it declines the block, runs of
    ``task.fast_run_lines`` lines are tried, and a run it declines is parsed line by line."""
    fast_on = task.fast_run_lines > 0
    whole_tried = fast_on and whole_first
    if whole_tried:
        newlines = newline_positions(task.block) if task.newlines is None else task.newlines
        n_lines = len(newlines) + 1
        iso = fast_block_isolating(
            parser,
            task.block,
            n_lines,
            task.kafka_partition,
            task.first_offset,
            task.relpath,
            task.arrow_schema,
            newlines,
        )
        if iso is not None:
            return _with_isolated(task, parser, iso, n_lines)
    declined = False if whole_tried else None
    lines = task.block.split(b"\n")
    if task.block.endswith(b"\n"):
        lines.pop()
    out = BlockResult(lines=len(lines), whole_block=declined)
    tables: list[pa.Table] = []
    rows: list[Any] = []
    step = task.fast_run_lines if fast_on else len(lines) or 1
    # A block of one run was just declined whole: the same lines as a run would be declined again.
    runs_on = fast_on and not (whole_tried and len(lines) <= step)
    for start in range(0, len(lines), step):
        run = lines[start : start + step]
        first = task.first_offset + start
        where = (task.kafka_partition, first, task.relpath, task.arrow_schema)  # the run's address, its rows' schema
        fast = fast_block(parser, b"\n".join(run), len(run), *where) if runs_on else None
        if fast is not None:
            if rows:
                tables.append(rows_to_arrow(rows, task.arrow_schema))
                rows = []
            tables.append(fast[0])
            out.late += fast[1]
            out.tombstones += fast[2]
            out.fast_lines += len(run)
            continue
        if not _parse_lines(parser, enumerate(run, start=first), task, out, rows):
            return BlockResult(unknown=out.unknown, wider=out.wider, unknown_at=out.unknown_at, whole_block=declined)
    if rows:
        tables.append(rows_to_arrow(rows, task.arrow_schema))
    out.rows = (tables[0] if len(tables) == 1 else pa.concat_tables(tables)) if tables else None
    return out
