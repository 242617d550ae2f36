"""Blocks of whole lines: read from a landing file (bounded memory), parsed into typed rows and quarantine records.

A block is the unit of parallel work: :class:`BlockTask` holds everything :func:`parse_block` needs (it is
pickled to worker processes), :class:`BlockResult` is what comes back. Parsing first tries the vectorised clean
path (:mod:`~logistics_platform.lib.bronze.fastpath`), which declines what it cannot prove identical to the
per-line parser (:class:`~logistics_platform.lib.bronze.envelope.LineParser`, the source of truth).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.types import IcebergType

from logistics_platform.lib.bronze.envelope import TOMBSTONE, LineParser, Rejected, raw_line_text
from logistics_platform.lib.bronze.fastpath import fast_block, fast_rows, newline_positions
from logistics_platform.lib.bronze.landing import CorruptFileError, LandingFile
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
    unknown_at: str = ""
    whole_block: bool | None = None  # the clean path took the block whole (True), declined it (False), not tried


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
    """(block of whole lines, offset of its first line, its :func:`fastpath.newline_positions`) of one file.

    Block by block (bounded memory). The newlines are found once: the count of the lines (one more than these)
    and the clean path's proof of their layout both need them. A damaged file yields its complete lines in
    front of the damage, then raises :class:`CorruptRead`.
    """
    offset = f.start_offset
    done = 0
    tail = b""
    # A plain file is read a block at a time (one read, no joining of smaller pieces).
    stream = f.reader() if f.gzipped else f.reader(block_bytes)
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


def parse_block(task: BlockTask, parser: LineParser, whole_first: bool = True) -> BlockResult:
    """Parse and validate one block of lines with ``parser``: typed rows as Arrow, quarantine records, counts.

    Unless ``task.fast_run_lines`` is 0, the whole block (if ``whole_first``), then runs of ``task.fast_run_lines``
    lines, are first tried on the vectorised clean path; a run it declines is parsed line by line.
    """
    fast_on = task.fast_run_lines > 0
    whole_tried = fast_on and whole_first
    if whole_tried:
        newlines = newline_positions(task.block) if task.newlines is None else task.newlines
        n_lines = len(newlines) + 1
        whole = fast_block(
            parser,
            task.block,
            n_lines,
            task.kafka_partition,
            task.first_offset,
            task.relpath,
            task.arrow_schema,
            newlines,
        )
        if whole is not None:
            return BlockResult(rows=whole[0], lines=n_lines, tombstones=whole[2], late=whole[1], whole_block=True)
    declined = False if whole_tried else None
    lines = task.block.split(b"\n")
    if task.block.endswith(b"\n"):
        lines.pop()
    late_index = parser.column_names.index("_is_late")
    parse, part, rel, topic, hour_us = parser.parse, task.kafka_partition, task.relpath, parser.topic, parser.arrival_us
    tables: list[pa.Table] = []
    rows: list[Any] = []
    add = rows.append
    quarantine: list[tuple[Any, ...]] = []
    reasons: Counter[str] = Counter()
    tombstones = late = 0
    step = task.fast_run_lines if fast_on else len(lines) or 1
    # A block of one run was just declined whole: the same lines as a run would be declined again.
    runs_on = fast_on and not (whole_tried and len(lines) <= step)
    for start in range(0, len(lines), step):
        run = lines[start : start + step]
        first = task.first_offset + start
        fast = fast_rows(parser, run, part, first, rel, task.arrow_schema) if runs_on else None
        if fast is not None:
            if rows:
                tables.append(rows_to_arrow(rows, task.arrow_schema))
                rows = []
                add = rows.append
            tables.append(fast[0])
            late += fast[1]
            tombstones += fast[2]
            continue
        for offset, raw in enumerate(run, start=first):
            res = parse(raw, part, offset, rel)
            if type(res) is list:
                if res[-1] is not None:
                    return BlockResult(unknown=res[-1], unknown_at=f"{rel}@{offset}", whole_block=declined)
                if res[late_index]:
                    late += 1
                add(res)
            elif res is TOMBSTONE:
                tombstones += 1
            else:
                assert isinstance(res, Rejected)
                reasons[res.reason] += 1
                text, enc = raw_line_text(raw)
                quarantine.append((topic, part, offset, rel, hour_us, res.reason, res.detail, text, enc))
    if rows:
        tables.append(rows_to_arrow(rows, task.arrow_schema))
    return BlockResult(
        rows=(tables[0] if len(tables) == 1 else pa.concat_tables(tables)) if tables else None,
        quarantine=quarantine,
        lines=len(lines),
        tombstones=tombstones,
        late=late,
        reasons=dict(reasons),
        whole_block=declined,
    )
