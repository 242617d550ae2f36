"""Bronze ingestion of arrival hours: landing files -> typed Iceberg tables, exactly once per hour.

For each bronze table a range of hours (or one hour) is replaced in ONE Iceberg commit (old files of those
hours removed, new files added), never touching other hours; each hour keeps its own data files. Data files
are written batch by batch first (bounded memory), then committed; a crash in between leaves the table as it
was (the written files become orphans that the maintenance job removes). Concurrent writers of other hours of
the same table are handled by optimistic concurrency: on ``CommitFailedException`` the table is reloaded and
the same replace is re-applied on the fresh metadata with the already-written files. ``bronze.ingest_log``
(one row per topic and hour) is replaced LAST, so a logged hour is a committed hour.

Every row value is a pure function of the landing files: the run id and the input file list go into
snapshot summary properties only. Lines are parsed in blocks of whole lines (in worker processes for large
hours, results consumed in file order), so memory does not grow with the size of the hour.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing
import random
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from itertools import count
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.expressions import BooleanExpression, EqualTo, In
from pyiceberg.io.pyarrow import (
    _dataframe_to_data_files,
    _determine_partitions,
    pyarrow_to_schema,
    schema_to_pyarrow,
    write_file,
)
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table, WriteTask
from pyiceberg.types import IcebergType, TimestampType

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.envelope import (
    TOMBSTONE,
    LineParser,
    Rejected,
    infer_iceberg_type,
    raw_line_text,
)
from logistics_platform.lib.bronze.fastpath import fast_block, fast_rows, newline_positions
from logistics_platform.lib.bronze.landing import (
    CorruptFileError,
    LandingFile,
    fingerprint,
    fingerprint_of,
    hour_partition_key,
    hour_start,
    list_hour_files,
)
from logistics_platform.lib.connections import load_catalog
from logistics_platform.settings import Settings

log = logging.getLogger(__name__)

# Snapshot summary property names (read by verify / time travel / the Dagster metadata).
PROP_PARTITION_KEY = "logistics.partition-key"
PROP_ARRIVAL_HOUR = "logistics.arrival-hour"
PROP_FINGERPRINT = "logistics.input-fingerprint"
PROP_FILES = "logistics.input-files"
PROP_LINES = "logistics.lines"
PROP_ROWS = "logistics.rows"
PROP_QUARANTINED = "logistics.quarantined"
PROP_TOMBSTONES = "logistics.tombstones"
PROP_RUN_ID = "dagster.run-id"
# Only on the commit of a range of hours (whose fingerprint property is then a JSON object: hour key -> fingerprint).
PROP_ARRIVAL_HOUR_END = "logistics.arrival-hour-end"
PROP_HOURS = "logistics.hours"
PROP_FILES_IN = "logistics.input-files-in"

MAX_COMMIT_ATTEMPTS = 12
TABLE_PROPERTIES = {
    "write.parquet.compression-codec": "zstd",
    # Level 1 (Arrow's default, made explicit): level 3 costs a fifth more write CPU for no smaller files once
    # dictionaries are bounded (benchmarks/parquet_encoding.py); negative levels write a quarter more bytes.
    "write.parquet.compression-level": "1",
    # Ids, offsets, timestamps and coordinates are nearly unique per row: a dictionary of them grows to the limit
    # and is then abandoned for plain encoding, wasted work that also leaves larger files. A small limit keeps
    # dictionaries for the columns that repeat (tenants, couriers, regions, statuses, topic, file) and gives up
    # on the others after the first write batch. Values are unchanged; only their encoding in the files is.
    "write.parquet.dict-size-bytes": str(64 * 1024),
    # Let pyiceberg write one file per flushed batch: the batch size bounds memory, not this.
    "write.target-file-size-bytes": str(512 * 1024 * 1024),
    # Writers of different hours of one day touch disjoint files; serializable isolation would reject them as
    # conflicts at day-partition granularity. Snapshot isolation still fails a commit whose deleted files were
    # changed concurrently (two runs of the same hour): the retry below then re-plans on fresh metadata.
    "write.update.isolation-level": "snapshot",
    "write.delete.isolation-level": "snapshot",
    # Conflicts are retried by replace_hour, which re-plans the hour's files on fresh metadata; pyiceberg's own
    # retry would re-apply a plan made on stale metadata.
    "commit.retry.num-retries": "0",
}

BeforeCommitHook = Callable[[str], None]
"""Called with the table identifier after its data files are written and the table metadata is loaded, right
before the first commit attempt (tests inject crashes and line up concurrent commits with it)."""


@dataclass
class TopicReport:
    """What one topic's arrival hour turned into."""

    table: str
    topic: str
    files: list[tuple[str, int]] = field(default_factory=list)
    fingerprint: str = ""
    bytes: int = 0
    lines: int = 0
    rows: int = 0
    quarantined: int = 0
    quarantined_by_reason: dict[str, int] = field(default_factory=dict)
    tombstones: int = 0
    late_events: int = 0
    data_files: int = 0
    added_columns: dict[str, str] = field(default_factory=dict)
    # Files that cannot be read to their end -> why and where reading stopped. Each has one quarantine row
    # (reason corrupt_file) besides the ``quarantined`` lines; its complete lines before the damage are in ``lines``.
    corrupt_files: dict[str, str] = field(default_factory=dict)
    snapshot_id: int | None = None
    commit_attempts: int = 0


@dataclass
class IngestReport:
    """Result of :func:`ingest_hour`: per-topic counts, snapshot ids and timing."""

    arrival_hour: datetime
    partition_key: str
    run_id: str | None
    topics: dict[str, TopicReport] = field(default_factory=dict)
    quarantine_snapshot_id: int | None = None
    ingest_log_snapshot_id: int | None = None
    duration_seconds: float = 0.0

    @property
    def lines(self) -> int:
        return sum(t.lines for t in self.topics.values())

    @property
    def rows(self) -> int:
        return sum(t.rows for t in self.topics.values())

    @property
    def quarantined(self) -> int:
        return sum(t.quarantined for t in self.topics.values())

    @property
    def tombstones(self) -> int:
        return sum(t.tombstones for t in self.topics.values())

    @property
    def corrupt_files(self) -> dict[str, str]:
        return {rel: why for t in self.topics.values() for rel, why in t.corrupt_files.items()}

    @property
    def quarantined_by_reason(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for t in self.topics.values():
            total.update(t.quarantined_by_reason)
        return dict(sorted(total.items()))

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["arrival_hour"] = self.arrival_hour.isoformat()
        return d


# ---------------------------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------------------------
def ensure_table(catalog: Catalog, identifier: str, schema: Schema, hour_column: str, sort_column: str) -> Table:
    """Load a bronze table, creating it (schema, day partitions on the hour column, sort order) on first use."""
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        pass
    else:
        stale = {k: v for k, v in TABLE_PROPERTIES.items() if table.properties.get(k) != v}
        if stale:  # tables created by an older version of this module
            with table.transaction() as tx:
                tx.set_properties(stale)
            table = catalog.load_table(identifier)
        return table
    try:
        return catalog.create_table(
            identifier,
            schema=schema,
            partition_spec=bs.partition_spec(schema, hour_column),
            sort_order=bs.sort_order(schema, sort_column),
            properties=TABLE_PROPERTIES,
        )
    except TableAlreadyExistsError:  # a concurrent run created it first
        return catalog.load_table(identifier)


def ensure_bronze_tables(catalog: Catalog) -> dict[str, Table]:
    """Every bronze table (topics, quarantine, ingest log), created when missing."""
    tables = {
        t: ensure_table(catalog, spec.identifier, bs.table_schema(spec), "_arrival_hour", "_event_time")
        for t, spec in bs.TOPICS.items()
    }
    tables[bs.QUARANTINE_TABLE] = ensure_table(
        catalog, f"{bs.NAMESPACE}.{bs.QUARANTINE_TABLE}", bs.quarantine_schema(), "_arrival_hour", "_offset"
    )
    tables[bs.INGEST_LOG_TABLE] = ensure_table(
        catalog, f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}", bs.ingest_log_schema(), "arrival_hour", "arrival_hour"
    )
    return tables


def evolved_columns(table: Table, spec: bs.TopicSpec) -> dict[str, IcebergType]:
    """Columns the table gained beyond the contract (schema evolution), in table order."""
    contract = {c.name for c in spec.columns} | {c.name for c in bs.metadata_columns(spec)}
    return {f.name: f.field_type for f in table.schema().fields if f.name not in contract}


def _retrying(what: str, action: Callable[[int], Any]) -> tuple[Any, int]:
    """Run ``action(attempt)`` until it commits; back off with jitter on concurrent-commit conflicts."""
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        try:
            return action(attempt), attempt
        except (CommitFailedException, ValidationException) as e:
            if attempt == MAX_COMMIT_ATTEMPTS:
                raise CommitFailedException(
                    f"{what}: still conflicting after {attempt} attempts with concurrent commits ({e}); "
                    "re-run the partition"
                ) from e
            delay = min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())
            log.info("%s: concurrent commit, retrying in %.2fs (attempt %d)", what, delay, attempt)
            time.sleep(delay)
    raise AssertionError("unreachable")


def add_columns(catalog: Catalog, identifier: str, columns: dict[str, IcebergType], origin: str) -> dict[str, str]:
    """Additive schema evolution: add the columns the table does not have yet (types of existing ones win)."""
    added: dict[str, str] = {}

    def attempt(_: int) -> None:
        added.clear()
        table = catalog.load_table(identifier)
        existing = {f.name for f in table.schema().fields}
        missing = {n: t for n, t in columns.items() if n not in existing}
        if not missing:
            return
        with table.update_schema() as update:
            for name, typ in missing.items():
                update.add_column((name,), typ, doc=f"Added by schema evolution; first seen in {origin}.")
                added[name] = str(typ)

    _retrying(f"{identifier}: add columns {sorted(columns)}", attempt)
    return dict(added)


def _range_filter(hour_column: str, hours: Sequence[datetime]) -> BooleanExpression:
    if len(hours) == 1:
        return EqualTo(hour_column, hours[0].isoformat())
    return In(hour_column, [h.isoformat() for h in hours])


def _hour_files(table: Table, hour_column: str, hours: Sequence[datetime]) -> tuple[list[DataFile], bool]:
    """Live data files that may hold rows of ``hours``; and whether each holds nothing but one of those hours."""
    if table.current_snapshot() is None:
        return [], True
    field_id = table.schema().find_field(hour_column).field_id
    wanted = sorted(_micros(h) for h in hours)
    files, whole = [], True
    for task in table.scan(row_filter=_range_filter(hour_column, hours)).plan_files():
        f = task.file
        lo, hi = f.lower_bounds.get(field_id), f.upper_bounds.get(field_id)
        lo_v = from_bytes(TimestampType(), lo) if lo is not None else None
        hi_v = from_bytes(TimestampType(), hi) if hi is not None else None
        if lo_v is not None and lo_v == hi_v and lo_v in wanted and not task.delete_files:
            files.append(f)
        elif lo_v is None or hi_v is None or any(lo_v <= h <= hi_v for h in wanted):
            whole = False
            files.append(f)
    return files, whole


def replace_hours(
    catalog: Catalog,
    identifier: str,
    hour_column: str,
    hours: Sequence[datetime],
    new_files: list[DataFile],
    properties: dict[str, str],
    before_commit: BeforeCommitHook | None = None,
) -> tuple[int | None, int]:
    """Replace the rows of ``hours`` by ``new_files`` in one commit; retried on concurrent commits.

    Returns (snapshot id, attempts). In the usual case every old file of these hours holds only one of them and
    the replace is metadata-only (one OVERWRITE snapshot). After compaction merged a day into larger files, the
    delete rewrites them copy-on-write (still one catalog commit). Hours outside ``hours`` are never touched.
    """

    def attempt(n: int) -> int | None:
        table = catalog.load_table(identifier)
        old, whole = _hour_files(table, hour_column, hours)
        if not old and not new_files:
            return table.current_snapshot().snapshot_id if table.current_snapshot() else None
        if before_commit is not None and n == 1:
            before_commit(identifier)
        with table.transaction() as tx:
            if not old:
                # Hours never ingested (the hourly run's usual case): an append, which carries the existing
                # manifests over by reference, where an overwrite would read every one of them to find deletes.
                with tx.update_snapshot(snapshot_properties=properties).fast_append() as fa:
                    for f in new_files:
                        fa.append_data_file(f)
            elif whole:
                with tx.update_snapshot(snapshot_properties=properties).overwrite() as ow:
                    for f in old:
                        ow.delete_data_file(f)
                    for f in new_files:
                        ow.append_data_file(f)
            else:
                tx.delete(_range_filter(hour_column, hours), snapshot_properties=properties)
                if new_files:
                    with tx.update_snapshot(snapshot_properties=properties).fast_append() as fa:
                        for f in new_files:
                            fa.append_data_file(f)
        snap = table.current_snapshot()
        return snap.snapshot_id if snap else None

    what = f"{hours[0]:%Y-%m-%d %H:00}" + (f" .. {hours[-1]:%Y-%m-%d %H:00}" if len(hours) > 1 else "")
    return _retrying(f"{identifier}: replace {what}", attempt)


def replace_hour(
    catalog: Catalog,
    identifier: str,
    hour_column: str,
    hour: datetime,
    new_files: list[DataFile],
    properties: dict[str, str],
    before_commit: BeforeCommitHook | None = None,
) -> tuple[int | None, int]:
    """:func:`replace_hours` of one hour."""
    return replace_hours(catalog, identifier, hour_column, [hour], new_files, properties, before_commit)


def _micros(dt: datetime) -> int:
    d = dt - datetime(1970, 1, 1)
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


# ---------------------------------------------------------------------------------------------------------------
# Batch writing
# ---------------------------------------------------------------------------------------------------------------
def conform(tbl: pa.Table, schema: pa.Schema) -> pa.Table:
    """``tbl`` with exactly ``schema``'s columns: columns added to the table since it was built read null."""
    if tbl.schema.equals(schema, check_metadata=True):
        return tbl
    n = tbl.num_rows
    names = set(tbl.column_names)
    arrays = [tbl.column(f.name) if f.name in names else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def rows_to_arrow(rows: list[Any], schema: pa.Schema) -> pa.Table:
    """Row lists/tuples (table column order; extra trailing items ignored) -> an Arrow table of ``schema``."""
    columns = list(zip(*rows, strict=False)) if rows else [() for _ in schema]
    return pa.Table.from_arrays([pa.array(columns[i], type=f.type) for i, f in enumerate(schema)], schema=schema)


class BatchWriter:
    """Collects rows and Arrow tables and writes one Parquet data file per ``batch_rows`` rows.

    Memory is bounded by the batch size: nothing of the hour is kept but the DataFile descriptions.
    """

    def __init__(self, table: Table, batch_rows: int) -> None:
        self.batch_rows = max(1, batch_rows)
        self.rows: list[Any] = []
        self.tables: list[pa.Table] = []
        self.pending = 0
        self.files: list[DataFile] = []
        self.write_uuid = uuid.uuid4()
        self.counter = count(0)
        self.reset(table)

    def reset(self, table: Table) -> None:
        """Use the table's current schema from now on (after a schema change; flush first)."""
        if self.pending:
            raise RuntimeError("flush before changing the schema")
        self.table = table
        self.arrow_schema = schema_to_pyarrow(table.schema(), include_field_ids=True)

    def add(self, row: Any) -> None:
        self.rows.append(row)
        self.pending += 1
        if self.pending >= self.batch_rows:
            self.flush()

    def add_table(self, tbl: pa.Table | None) -> None:
        if tbl is None or tbl.num_rows == 0:
            return
        self.tables.append(conform(tbl, self.arrow_schema))
        self.pending += tbl.num_rows
        if self.pending >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        parts = self.tables
        if self.rows:
            parts.append(rows_to_arrow(self.rows, self.arrow_schema))
        self.rows, self.tables, self.pending = [], [], 0
        batch = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        del parts
        self.files.extend(write_data_files(self.table, batch, self.write_uuid, self.counter))


def write_data_files(table: Table, batch: pa.Table, write_uuid: uuid.UUID, counter: Iterator[int]) -> list[DataFile]:
    """Write ``batch`` as Parquet data file(s) of ``table`` without committing them.

    A batch of one partition (always the case here: one arrival hour) is written as one file directly;
    pyiceberg's generic path would group and filter the whole batch by partition first.
    """
    md = table.metadata
    spec, schema = md.spec(), md.schema()
    single = not spec.is_unpartitioned() and batch.num_rows > 0
    if single:
        for pf in spec.fields:
            name = schema.find_column_name(pf.source_id)
            column = batch.column(name) if name is not None else None
            if column is None or column.null_count or len(set(pc.min_max(column).values())) != 1:
                single = False
                break
    if not single:
        return list(
            _dataframe_to_data_files(table_metadata=md, df=batch, io=table.io, write_uuid=write_uuid, counter=counter)
        )
    (first,) = _determine_partitions(spec, schema, batch.slice(0, 1))
    task_schema = pyarrow_to_schema(batch.schema, name_mapping=schema.name_mapping, format_version=md.format_version)
    task = WriteTask(
        write_uuid=write_uuid,
        task_id=next(counter),
        schema=task_schema,
        record_batches=batch.to_batches(),
        partition_key=first.partition_key,
    )
    return list(write_file(table.io, md, iter([task])))


# ---------------------------------------------------------------------------------------------------------------
# Parsing blocks of lines (in this process or in worker processes)
# ---------------------------------------------------------------------------------------------------------------
BLOCK_BYTES = 8 * 1024 * 1024  # lines are parsed in blocks of at most this size: the unit of parallel work
MIN_BLOCK_BYTES = 64 * 1024
PARALLEL_MIN_BYTES = 32 * 1024 * 1024  # below this an hour is parsed in-process (no pool start-up cost)
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


@dataclass(frozen=True)
class BlockTask:
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


class CorruptRead(Exception):
    """Where reading a damaged file stopped: raised by :func:`iter_blocks` after its last complete line."""

    def __init__(self, f: LandingFile, error: CorruptFileError, offset: int, content_bytes: int, tail: bytes) -> None:
        self.file = f
        self.error = error
        self.offset = offset  # record offset the next line would have had: start offset + complete lines read
        self.content_bytes = content_bytes  # decompressed bytes of the complete lines read
        self.tail = tail  # the incomplete line in front of the damage
        super().__init__(str(error))

    @property
    def lines(self) -> int:
        return self.offset - self.file.start_offset

    def detail(self) -> str:
        """The quarantine row's error detail: the error, where reading stopped, the file's size."""
        where = f"reading stopped after {self.lines} complete lines (at offset {self.offset}, content byte "
        where += f"{self.content_bytes}"
        if self.error.compressed_at is not None:
            where += f", compressed byte {self.error.compressed_at}"
        return f"{self.error.error}; {where}); file size {self.file.size} bytes"


def iter_blocks(f: LandingFile, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[bytes, int]]:
    """(block of whole lines, offset of its first line) of one file, block by block (bounded memory).

    A damaged file yields its complete lines in front of the damage, then raises :class:`CorruptRead`.
    """
    for block, first, _ in iter_counted_blocks(f, block_bytes):
        yield block, first


def iter_counted_blocks(f: LandingFile, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[bytes, int, np.ndarray]]:
    """:func:`iter_blocks` with each block's :func:`fastpath.newline_positions` (found once: the count of the lines,
    one more than these, and the clean path's proof of their layout both need them)."""
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


_PARSERS: dict[tuple[Any, ...], LineParser] = {}
# Per parser: [whole blocks taken by the clean path, whole blocks it declined]. A block is first tried whole
# (no splitting into lines); where whole blocks keep being declined (odd lines are common in this topic and
# hour), only runs of lines are tried, so a dirty hour does not pay for decoding its blocks twice.
_WHOLE_BLOCKS: dict[tuple[Any, ...], list[int]] = {}


def parse_block(task: BlockTask) -> BlockResult:
    """Parse and validate one block of lines: typed rows as Arrow, quarantine records, counts.

    The whole block, then runs of ``task.fast_run_lines`` lines, are first tried on the vectorised clean path
    (:func:`~logistics_platform.lib.bronze.fastpath.fast_block`); a run it declines is parsed line by line.
    """
    key = (task.table, task.hour, task.lateness_seconds, task.evolved)
    parser = _PARSERS.get(key)
    if parser is None:
        if len(_PARSERS) > 64:
            _PARSERS.clear()
            _WHOLE_BLOCKS.clear()
        parser = _PARSERS[key] = LineParser(bs.TOPICS[task.table], task.hour, task.lateness_seconds, dict(task.evolved))
    fast_on = task.fast_run_lines > 0
    whole_tried = False
    stats = _WHOLE_BLOCKS.setdefault(key, [0, 0])
    if fast_on and (stats[1] < 2 or stats[0] >= stats[1]):
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
        whole_tried = True
        if whole is not None:
            stats[0] += 1
            return BlockResult(rows=whole[0], lines=n_lines, tombstones=whole[2], late=whole[1])
        stats[1] += 1
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
                    return BlockResult(unknown=res[-1], unknown_at=f"{rel}@{offset}")
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
    )


_EXECUTORS: dict[int, ProcessPoolExecutor] = {}


def _executor(workers: int) -> ProcessPoolExecutor:
    """A process pool kept for the life of this process: a backfill of many hours pays the start-up once."""
    ex = _EXECUTORS.get(workers)
    if ex is None or getattr(ex, "_broken", False):
        # spawn: forking a process that runs threads (Dagster, pyiceberg's executor) is unsafe
        ex = _EXECUTORS[workers] = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        atexit.register(ex.shutdown, cancel_futures=True)
    return ex


def shutdown_workers() -> None:
    """Stop the parse worker processes now (they are otherwise stopped when this process exits)."""
    while _EXECUTORS:
        _, ex = _EXECUTORS.popitem()
        ex.shutdown(cancel_futures=True)


class _Pool:
    """Ordered map over block tasks: in this process, or in worker processes with a bounded window."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.executor = _executor(workers) if workers > 1 else None

    def map(self, tasks: Iterator[BlockTask]) -> Iterator[tuple[BlockTask, BlockResult]]:
        if self.executor is None:
            for task in tasks:
                yield task, parse_block(task)
            return
        window: deque[tuple[BlockTask, Future[BlockResult]]] = deque()
        try:
            for task in tasks:
                window.append((task, self.executor.submit(parse_block, task)))
                if len(window) > 2 * self.workers:
                    t, fut = window.popleft()
                    yield t, fut.result()
            while window:
                t, fut = window.popleft()
                yield t, fut.result()
        finally:
            for _, fut in window:  # on an error, do not leave parsed blocks of this hour queued
                fut.cancel()


# ---------------------------------------------------------------------------------------------------------------
# The hour
# ---------------------------------------------------------------------------------------------------------------
def _ingest_topic(
    catalog: Catalog,
    table: Table,
    spec: bs.TopicSpec,
    hour: datetime,
    files: list[LandingFile],
    settings: Settings,
    quarantine: BatchWriter,
    report: TopicReport,
    pool: _Pool,
    fast_run_lines: int = FAST_RUN_LINES,
) -> BatchWriter:
    writer = BatchWriter(table, settings.ingest_batch_rows)
    lateness = settings.allowed_lateness_seconds
    state = {"evolved": tuple(evolved_columns(table, spec).items()), "schema": writer.arrow_schema}

    corrupt: list[CorruptRead] = []

    def tasks() -> Iterator[BlockTask]:
        for f in files:
            try:
                for block, first, newlines in iter_counted_blocks(f, block_bytes):
                    yield BlockTask(
                        spec.table,
                        hour,
                        lateness,
                        state["evolved"],
                        state["schema"],
                        block,
                        f.kafka_partition,
                        first,
                        f.relpath,
                        fast_run_lines,
                        newlines,
                    )
            except CorruptRead as e:  # its readable lines are in the tasks above; the file gets one row
                corrupt.append(e)

    reasons: Counter[str] = Counter()
    # A block's rows are in memory at once: keep blocks near the batch size (assuming ~256 bytes a line).
    block_bytes = min(BLOCK_BYTES, max(MIN_BLOCK_BYTES, settings.ingest_batch_rows * 256))
    for task, result in pool.map(tasks()):
        res = result
        while res.unknown is not None:
            # Columns the table does not have: add them (types from this first line), then parse the block again.
            writer.flush()
            types = {n: infer_iceberg_type([v]) for n, v in res.unknown.items()}
            report.added_columns.update(add_columns(catalog, spec.identifier, types, res.unknown_at))
            table = catalog.load_table(spec.identifier)
            writer.reset(table)
            state["evolved"], state["schema"] = tuple(evolved_columns(table, spec).items()), writer.arrow_schema
            res = parse_block(replace(task, evolved=state["evolved"], arrow_schema=state["schema"]))
        writer.add_table(res.rows)
        for q in res.quarantine:
            quarantine.add(q)
        report.lines += res.lines
        report.rows += res.rows.num_rows if res.rows is not None else 0
        report.tombstones += res.tombstones
        report.late_events += res.late
        reasons.update(res.reasons)
    writer.flush()
    hour_us = _micros(hour)
    for c in corrupt:
        text, enc = raw_line_text(c.tail)
        address = (spec.topic, c.file.kafka_partition, c.offset, c.file.relpath, hour_us)
        quarantine.add((*address, bs.REASON_CORRUPT_FILE, c.detail(), text, enc))
        report.corrupt_files[c.file.relpath] = c.detail()
        log.warning("%s: %s", c.file.relpath, c.detail())
    report.quarantined = sum(reasons.values())
    report.quarantined_by_reason = dict(sorted(reasons.items()))
    report.data_files = len(writer.files)
    return writer


def _properties(keys: Sequence[str], hours: Sequence[datetime], run_id: str | None, **counts: Any) -> dict[str, str]:
    """Snapshot summary properties of a commit covering ``keys`` (one hour, or a range of them)."""
    if len(keys) == 1:
        props = {PROP_PARTITION_KEY: keys[0], PROP_ARRIVAL_HOUR: hours[0].isoformat()}
    else:
        props = {
            PROP_PARTITION_KEY: f"{keys[0]}..{keys[-1]}",
            PROP_ARRIVAL_HOUR: hours[0].isoformat(),
            PROP_ARRIVAL_HOUR_END: hours[-1].isoformat(),
            PROP_HOURS: str(len(keys)),
        }
    props.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in counts.items()})
    if run_id:
        props[PROP_RUN_ID] = run_id
    return props


def consecutive_ranges(hours: Sequence[datetime], max_hours: int) -> list[list[datetime]]:
    """The distinct hours, sorted and cut into runs of consecutive hours of at most ``max_hours`` each.

    A gap starts a new run: a range over it would also ingest (and record) the hours in between.
    """
    out: list[list[datetime]] = []
    for hour in sorted({hour_start(h) for h in hours}):
        if out and hour - out[-1][-1] == timedelta(hours=1) and len(out[-1]) < max(1, max_hours):
            out[-1].append(hour)
        else:
            out.append([hour])
    return out


def ingest_hour(
    settings: Settings,
    arrival_hour: datetime,
    run_id: str | None = None,
    *,
    before_commit: BeforeCommitHook | None = None,
    progress: Callable[[str], None] | None = None,
    parallel_min_bytes: int = PARALLEL_MIN_BYTES,
    fast_run_lines: int = FAST_RUN_LINES,
) -> IngestReport:
    """Replace one arrival hour in every bronze table with what the landing zone holds for it (idempotent).

    The range of one hour of :func:`ingest_hours`.
    """
    (report,) = ingest_hours(
        settings,
        [arrival_hour],
        run_id,
        before_commit=before_commit,
        progress=progress,
        parallel_min_bytes=parallel_min_bytes,
        fast_run_lines=fast_run_lines,
    )
    return report


def ingest_hours(
    settings: Settings,
    arrival_hours: Sequence[datetime],
    run_id: str | None = None,
    *,
    before_commit: BeforeCommitHook | None = None,
    progress: Callable[[str], None] | None = None,
    parallel_min_bytes: int = PARALLEL_MIN_BYTES,
    fast_run_lines: int = FAST_RUN_LINES,
) -> list[IngestReport]:
    """Replace arrival hours in every bronze table with what the landing zone holds for them (idempotent).

    ONE commit per table for all of ``arrival_hours`` (any set of hours, in any order; reports come back in
    hour order): every hour is parsed and written first, then each table's files of these hours are swapped
    for the new ones atomically, the ingest log last. Each hour keeps its own data files, so the rows, the
    files and a later re-ingest of any single hour are exactly what hour-by-hour ingest gives.

    Hours of at least ``parallel_min_bytes`` are parsed by ``settings.ingest_workers`` processes.
    Runs of ``fast_run_lines`` lines are first tried on the vectorised clean path (:mod:`lib.fastpath`), which
    declines any run it cannot prove identical; ``0`` parses every line with the per-line parser (the source of
    truth: same result, slower).
    """
    started = time.perf_counter()
    hours = sorted({hour_start(h) for h in arrival_hours})
    if not hours:
        raise ValueError("ingest_hours: no arrival hours given; pass at least one hour")
    keys = [hour_partition_key(h) for h in hours]
    say = progress or log.info
    catalog = load_catalog(settings)
    tables = ensure_bronze_tables(catalog)
    reports = [IngestReport(arrival_hour=h, partition_key=k, run_id=run_id) for h, k in zip(hours, keys, strict=True)]
    quarantines = [BatchWriter(tables[bs.QUARANTINE_TABLE], settings.ingest_batch_rows) for _ in hours]
    files_by_hour = [
        {name: list_hour_files(settings.landing_dir, spec.topic, h) for name, spec in bs.TOPICS.items()} for h in hours
    ]
    pools = [
        _Pool(settings.ingest_workers if sum(f.size for fs in hf.values() for f in fs) >= parallel_min_bytes else 1)
        for hf in files_by_hour
    ]
    label = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
    for name, spec in bs.TOPICS.items():
        new_files: list[DataFile] = []
        for i, hour in enumerate(hours):
            files = files_by_hour[i][name]
            tr = TopicReport(table=name, topic=spec.topic)
            tr.files = [(f.relpath, f.size) for f in files]
            tr.fingerprint = fingerprint(files)
            tr.bytes = sum(f.size for f in files)
            reports[i].topics[name] = tr
            # Per hour only to the module log: in a run's event log each line is a stored event, and a day's range
            # would add one per table and hour; the table's line below sums them.
            log.debug("%s %s: reading %d files, %s bytes", keys[i], spec.identifier, len(files), f"{tr.bytes:,}")
            writer = _ingest_topic(
                catalog, tables[name], spec, hour, files, settings, quarantines[i], tr, pools[i], fast_run_lines
            )
            # Nothing commits to this table before its hours are all written, but a schema evolution reloads it.
            tables[name] = writer.table
            new_files.extend(writer.files)
        trs = [r.topics[name] for r in reports]
        props = _properties(
            keys,
            hours,
            run_id,
            **_range_counts(
                trs,
                keys,
                lines=sum(t.lines for t in trs),
                rows=sum(t.rows for t in trs),
                quarantined=sum(t.quarantined for t in trs),
                tombstones=sum(t.tombstones for t in trs),
            ),
        )
        snapshot_id, attempts = replace_hours(
            catalog, spec.identifier, "_arrival_hour", hours, new_files, props, before_commit
        )
        for t in trs:
            t.snapshot_id, t.commit_attempts = snapshot_id, attempts
        damaged = sum(len(t.corrupt_files) for t in trs)
        note = f", {damaged} corrupt files (see bronze.quarantine)" if damaged else ""
        say(
            f"{label} {spec.identifier}: {sum(len(t.files) for t in trs):,} files, "
            f"{sum(t.bytes for t in trs):,} bytes, {sum(t.lines for t in trs):,} lines -> "
            f"{sum(t.rows for t in trs):,} rows, "
            f"{sum(t.quarantined for t in trs):,} quarantined, {sum(t.tombstones for t in trs):,} tombstones{note}; "
            f"snapshot {snapshot_id}"
        )
    _finish_hours(catalog, hours, keys, run_id, quarantines, reports, tables, before_commit)
    elapsed = time.perf_counter() - started
    for r in reports:
        r.duration_seconds = elapsed
    say(
        f"{label}: {sum(r.lines for r in reports):,} lines -> {sum(r.rows for r in reports):,} rows, "
        f"{sum(r.quarantined for r in reports):,} quarantined, {sum(r.tombstones for r in reports):,} tombstones "
        f"in {elapsed:.1f}s"
    )
    return reports


def _range_counts(trs: Sequence[TopicReport], keys: Sequence[str], **counts: int) -> dict[str, Any]:
    """The fingerprint, file list and counts of one table's commit: as today for one hour; per hour for a range
    (the file lists of a range are in its ``bronze.ingest_log`` rows)."""
    if len(trs) == 1:
        fingerprints: Any = trs[0].fingerprint
        files: dict[str, Any] = {PROP_FILES: trs[0].files}
    else:
        fingerprints = {k: t.fingerprint for k, t in zip(keys, trs, strict=True)}
        files = {PROP_FILES_IN: f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}"}
    return {
        PROP_FINGERPRINT: fingerprints,
        **files,
        PROP_LINES: counts["lines"],
        PROP_ROWS: counts["rows"],
        PROP_QUARANTINED: counts["quarantined"],
        PROP_TOMBSTONES: counts["tombstones"],
    }


def _finish_hours(
    catalog: Catalog,
    hours: Sequence[datetime],
    keys: Sequence[str],
    run_id: str | None,
    quarantines: Sequence[BatchWriter],
    reports: Sequence[IngestReport],
    tables: dict[str, Table],
    before_commit: BeforeCommitHook | None,
) -> None:
    """Commit the quarantine, then the ingest log: a log row is the proof that its hour is complete."""
    for q in quarantines:
        q.flush()
    fingerprints = [fingerprint_of([rel for t in r.topics.values() for rel in t.files]) for r in reports]
    q_props = _properties(
        keys,
        hours,
        run_id,
        **{
            PROP_FINGERPRINT: fingerprints[0] if len(keys) == 1 else dict(zip(keys, fingerprints, strict=True)),
            PROP_LINES: sum(r.lines for r in reports),
            PROP_QUARANTINED: sum(r.quarantined for r in reports),
        },
    )
    q_id = f"{bs.NAMESPACE}.{bs.QUARANTINE_TABLE}"
    q_files = [f for q in quarantines for f in q.files]
    q_snapshot, _ = replace_hours(catalog, q_id, "_arrival_hour", hours, q_files, q_props, before_commit)

    log_files: list[DataFile] = []
    for hour, report in zip(hours, reports, strict=True):
        report.quarantine_snapshot_id = q_snapshot
        log_writer = BatchWriter(tables[bs.INGEST_LOG_TABLE], 1000)  # one file per hour, as hour by hour
        hour_us = _micros(hour)
        for t in report.topics.values():
            if not t.files:
                continue  # an hour a topic did not land in has nothing to account for
            log_writer.add(
                (
                    t.topic,
                    hour_us,
                    json.dumps(t.files),
                    t.fingerprint,
                    len(t.files),
                    t.bytes,
                    t.lines,
                    t.rows,
                    t.quarantined,
                    t.tombstones,
                    t.late_events,
                )
            )
        log_writer.flush()
        log_files.extend(log_writer.files)
    log_snapshot, _ = replace_hours(
        catalog,
        f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}",
        "arrival_hour",
        hours,
        log_files,
        q_props,
        before_commit,
    )
    for report in reports:
        report.ingest_log_snapshot_id = log_snapshot
