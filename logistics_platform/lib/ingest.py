"""Bronze ingestion of one arrival hour: landing files -> typed Iceberg tables, exactly once per hour.

For each bronze table the hour is replaced in ONE Iceberg commit (old files of the hour removed, new files
added), never touching other hours. Data files are written batch by batch first (bounded memory), then
committed; a crash in between leaves the table as it was (the written files become orphans that the
maintenance job removes). Concurrent writers of other hours of the same table are handled by optimistic
concurrency: on ``CommitFailedException`` the table is reloaded and the same replace is re-applied on the
fresh metadata with the already-written files. ``bronze.ingest_log`` is replaced LAST, so a logged hour is
a committed hour.

Every row value is a pure function of the landing files: the run id, timing and host go into snapshot
summary properties only.
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from itertools import count
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationException,
)
from pyiceberg.expressions import EqualTo
from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow
from pyiceberg.manifest import DataFile
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import IcebergType, TimestampType

from logistics_platform.lib import bronze_schema as bs
from logistics_platform.lib.catalog import load_catalog
from logistics_platform.lib.envelope import (
    TOMBSTONE,
    LineParser,
    Rejected,
    infer_iceberg_type,
    raw_line_text,
)
from logistics_platform.lib.landing import (
    LandingFile,
    fingerprint,
    fingerprint_of,
    hour_partition_key,
    hour_start,
    list_hour_files,
)
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

MAX_COMMIT_ATTEMPTS = 12
TABLE_PROPERTIES = {
    "write.parquet.compression-codec": "zstd",
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
                update.add_column(name, typ, doc=f"Added by schema evolution; first seen in {origin}.")
                added[name] = str(typ)

    _retrying(f"{identifier}: add columns {sorted(columns)}", attempt)
    return dict(added)


def _hour_files(table: Table, hour_column: str, hour: datetime) -> tuple[list[DataFile], bool]:
    """Live data files that may hold rows of ``hour``; and whether each holds nothing but that hour."""
    if table.current_snapshot() is None:
        return [], True
    field_id = table.schema().find_field(hour_column).field_id
    hour_us = _micros(hour)
    files, whole = [], True
    for task in table.scan(row_filter=EqualTo(hour_column, hour.isoformat())).plan_files():
        f = task.file
        lo, hi = f.lower_bounds.get(field_id), f.upper_bounds.get(field_id)
        lo_v = from_bytes(TimestampType(), lo) if lo is not None else None
        hi_v = from_bytes(TimestampType(), hi) if hi is not None else None
        if lo_v == hour_us and hi_v == hour_us and not task.delete_files:
            files.append(f)
        elif lo_v is None or hi_v is None or lo_v <= hour_us <= hi_v:
            whole = False
            files.append(f)
    return files, whole


def replace_hour(
    catalog: Catalog,
    identifier: str,
    hour_column: str,
    hour: datetime,
    new_files: list[DataFile],
    properties: dict[str, str],
    before_commit: BeforeCommitHook | None = None,
) -> tuple[int | None, int]:
    """Replace the rows of one hour by ``new_files`` in one commit; retried on concurrent commits.

    Returns (snapshot id, attempts). In the usual case every old file of the hour holds only that hour and the
    replace is metadata-only (one OVERWRITE snapshot). After compaction merged a day into larger files, the
    delete rewrites them copy-on-write (still one catalog commit).
    """

    def attempt(n: int) -> int | None:
        table = catalog.load_table(identifier)
        old, whole = _hour_files(table, hour_column, hour)
        if not old and not new_files:
            return table.current_snapshot().snapshot_id if table.current_snapshot() else None
        if before_commit is not None and n == 1:
            before_commit(identifier)
        with table.transaction() as tx:
            if whole:
                with tx.update_snapshot(snapshot_properties=properties).overwrite() as ow:
                    for f in old:
                        ow.delete_data_file(f)
                    for f in new_files:
                        ow.append_data_file(f)
            else:
                tx.delete(EqualTo(hour_column, hour.isoformat()), snapshot_properties=properties)
                if new_files:
                    with tx.update_snapshot(snapshot_properties=properties).fast_append() as fa:
                        for f in new_files:
                            fa.append_data_file(f)
        snap = table.current_snapshot()
        return snap.snapshot_id if snap else None

    return _retrying(f"{identifier}: replace hour {hour:%Y-%m-%d %H:00}", attempt)


def _micros(dt: datetime) -> int:
    d = dt - datetime(1970, 1, 1)
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


# ---------------------------------------------------------------------------------------------------------------
# Batch writing
# ---------------------------------------------------------------------------------------------------------------
class BatchWriter:
    """Collects row tuples and writes one Parquet data file per batch (memory bounded by the batch size)."""

    def __init__(self, table: Table, batch_rows: int) -> None:
        self.batch_rows = max(1, batch_rows)
        self.rows: list[tuple[Any, ...]] = []
        self.files: list[DataFile] = []
        self.write_uuid = uuid.uuid4()
        self.counter = count(0)
        self.reset(table)

    def reset(self, table: Table) -> None:
        """Use the table's current schema from now on (after a schema change; flush first)."""
        if self.rows:
            raise RuntimeError("flush before changing the schema")
        self.table = table
        self.arrow_schema = schema_to_pyarrow(table.schema(), include_field_ids=True)
        self.width = len(self.arrow_schema)

    def add(self, row: tuple[Any, ...]) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        columns = list(zip(*self.rows, strict=False))
        self.rows = []
        arrays = [pa.array(columns[i], type=self.arrow_schema.field(i).type) for i in range(self.width)]
        del columns
        batch = pa.Table.from_arrays(arrays, schema=self.arrow_schema)
        del arrays
        self.files.extend(
            _dataframe_to_data_files(
                table_metadata=self.table.metadata,
                df=batch,
                io=self.table.io,
                write_uuid=self.write_uuid,
                counter=self.counter,
            )
        )


# ---------------------------------------------------------------------------------------------------------------
# The hour
# ---------------------------------------------------------------------------------------------------------------
def _lines(f: LandingFile) -> Iterator[tuple[int, bytes]]:
    with f.open() as stream:
        for i, raw in enumerate(stream, start=f.start_offset):
            yield i, (raw[:-1] if raw[-1:] == b"\n" else raw)


def _ingest_topic(
    catalog: Catalog,
    spec: bs.TopicSpec,
    hour: datetime,
    files: list[LandingFile],
    settings: Settings,
    quarantine: BatchWriter,
    report: TopicReport,
) -> BatchWriter:
    table = catalog.load_table(spec.identifier)
    writer = BatchWriter(table, settings.ingest_batch_rows)
    parser = LineParser(spec, hour, settings.allowed_lateness_seconds, evolved_columns(table, spec))
    late_index = parser.column_names.index("_is_late")
    hour_us = parser.arrival_us
    topic = spec.topic
    reasons: Counter[str] = Counter()
    rows = tombstones = late = lines = 0
    add_row, add_q = writer.add, quarantine.add
    for f in files:
        part, rel = f.kafka_partition, f.relpath
        parse = parser.parse
        for offset, raw in _lines(f):
            lines += 1
            res = parse(raw, part, offset, rel)
            if type(res) is tuple and res[-1] is not None:
                # A column the table does not have: add it, then parse the line again with it known.
                writer.flush()
                types = {n: infer_iceberg_type([v]) for n, v in res[-1].items()}
                report.added_columns.update(add_columns(catalog, spec.identifier, types, f"{rel}@{offset}"))
                table = catalog.load_table(spec.identifier)
                writer.reset(table)
                parser = LineParser(spec, hour, settings.allowed_lateness_seconds, evolved_columns(table, spec))
                late_index = parser.column_names.index("_is_late")
                parse, add_row = parser.parse, writer.add
                res = parse(raw, part, offset, rel)
                if type(res) is tuple and res[-1] is not None:
                    raise RuntimeError(f"{spec.identifier}: columns {sorted(res[-1])} still unknown after adding")
            if type(res) is tuple:
                rows += 1
                if res[late_index]:
                    late += 1
                add_row(res)  # the writer ignores the trailing extras slot
            elif res is TOMBSTONE:
                tombstones += 1
            else:
                assert isinstance(res, Rejected)
                reasons[res.reason] += 1
                text, enc = raw_line_text(raw)
                add_q((topic, part, offset, rel, hour_us, res.reason, res.detail, text, enc))
    writer.flush()
    report.lines, report.rows, report.tombstones, report.late_events = lines, rows, tombstones, late
    report.quarantined = sum(reasons.values())
    report.quarantined_by_reason = dict(sorted(reasons.items()))
    report.data_files = len(writer.files)
    return writer


def _properties(key: str, hour: datetime, run_id: str | None, **counts: Any) -> dict[str, str]:
    props = {PROP_PARTITION_KEY: key, PROP_ARRIVAL_HOUR: hour.isoformat()}
    props.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in counts.items()})
    if run_id:
        props[PROP_RUN_ID] = run_id
    return props


def ingest_hour(
    settings: Settings,
    arrival_hour: datetime,
    run_id: str | None = None,
    *,
    before_commit: BeforeCommitHook | None = None,
    progress: Callable[[str], None] | None = None,
) -> IngestReport:
    """Replace one arrival hour in every bronze table with what the landing zone holds for it (idempotent)."""
    started = time.perf_counter()
    hour = hour_start(arrival_hour)
    key = hour_partition_key(hour)
    say = progress or log.info
    catalog = load_catalog(settings)
    tables = ensure_bronze_tables(catalog)
    report = IngestReport(arrival_hour=hour, partition_key=key, run_id=run_id)
    quarantine = BatchWriter(tables[bs.QUARANTINE_TABLE], settings.ingest_batch_rows)

    for name, spec in bs.TOPICS.items():
        files = list_hour_files(settings.landing_dir, spec.topic, hour)
        tr = TopicReport(table=name, topic=spec.topic)
        tr.files = [(f.relpath, f.size) for f in files]
        tr.fingerprint = fingerprint(files)
        tr.bytes = sum(f.size for f in files)
        report.topics[name] = tr
        say(f"{key} {spec.identifier}: reading {len(files)} files, {tr.bytes:,} bytes")
        writer = _ingest_topic(catalog, spec, hour, files, settings, quarantine, tr)
        props = _properties(
            key,
            hour,
            run_id,
            **{
                PROP_FINGERPRINT: tr.fingerprint,
                PROP_FILES: tr.files,
                PROP_LINES: tr.lines,
                PROP_ROWS: tr.rows,
                PROP_QUARANTINED: tr.quarantined,
                PROP_TOMBSTONES: tr.tombstones,
            },
        )
        tr.snapshot_id, tr.commit_attempts = replace_hour(
            catalog, spec.identifier, "_arrival_hour", hour, writer.files, props, before_commit
        )
        say(
            f"{key} {spec.identifier}: {tr.lines:,} lines -> {tr.rows:,} rows, {tr.quarantined:,} quarantined, "
            f"{tr.tombstones:,} tombstones; snapshot {tr.snapshot_id}"
        )

    quarantine.flush()
    all_files = [rel for t in report.topics.values() for rel in t.files]
    q_props = _properties(
        key,
        hour,
        run_id,
        **{
            PROP_FINGERPRINT: fingerprint_of(all_files),
            PROP_LINES: report.lines,
            PROP_QUARANTINED: report.quarantined,
        },
    )
    q_id = f"{bs.NAMESPACE}.{bs.QUARANTINE_TABLE}"
    report.quarantine_snapshot_id, _ = replace_hour(
        catalog, q_id, "_arrival_hour", hour, quarantine.files, q_props, before_commit
    )

    log_writer = BatchWriter(tables[bs.INGEST_LOG_TABLE], 1000)
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
    report.ingest_log_snapshot_id, _ = replace_hour(
        catalog,
        f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}",
        "arrival_hour",
        hour,
        log_writer.files,
        q_props,
        before_commit,
    )
    report.duration_seconds = time.perf_counter() - started
    say(
        f"{key}: {report.lines:,} lines -> {report.rows:,} rows, {report.quarantined:,} quarantined, "
        f"{report.tombstones:,} tombstones in {report.duration_seconds:.1f}s"
    )
    return report
