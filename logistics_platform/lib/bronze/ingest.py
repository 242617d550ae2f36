"""Bronze ingestion of arrival hours: landing files -> typed Iceberg tables, exactly once per hour.

For each bronze table a range of hours (or one hour) is replaced in ONE Iceberg commit (old files of those
hours removed, new files added), never touching other hours; each hour keeps its own data files. Data files
are written batch by batch first (bounded memory, :mod:`~logistics_platform.lib.bronze.topic_hour`), then
committed (:mod:`~logistics_platform.lib.bronze.commit`, retried on concurrent writers); a crash in between
leaves the table as it was (the written files become orphans that the maintenance job removes).
``bronze.ingest_log`` (one row per topic and hour) is replaced LAST, so a logged hour is a committed hour.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from pyiceberg.catalog import Catalog
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.blocks import FAST_RUN_LINES
from logistics_platform.lib.bronze.commit import BeforeCommitHook, replace_hours
from logistics_platform.lib.bronze.landing import fingerprint, fingerprint_of, list_hour_files
from logistics_platform.lib.bronze.pool import PARALLEL_MIN_BYTES, BlockPool
from logistics_platform.lib.bronze.reports import (
    PROP_FINGERPRINT,
    PROP_LINES,
    PROP_QUARANTINED,
    IngestReport,
    TopicReport,
    snapshot_properties,
    topic_counts,
)
from logistics_platform.lib.bronze.tables import ensure_bronze_tables
from logistics_platform.lib.bronze.topic_hour import write_topic_hour
from logistics_platform.lib.bronze.writer import BatchWriter
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.timekeys import epoch_micros, hour_key, hour_start
from logistics_platform.settings import Settings

log = logging.getLogger(__name__)


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
    keys = [hour_key(h) for h in hours]
    say = progress or log.info
    catalog = load_catalog(settings)
    tables = ensure_bronze_tables(catalog)
    reports = [IngestReport(arrival_hour=h, partition_key=k, run_id=run_id) for h, k in zip(hours, keys, strict=True)]
    quarantines = [BatchWriter(tables[bs.QUARANTINE_TABLE], settings.ingest_batch_rows) for _ in hours]
    files_by_hour = [
        {name: list_hour_files(settings.landing_dir, spec.topic, h) for name, spec in bs.TOPICS.items()} for h in hours
    ]
    pools = [
        BlockPool(settings.ingest_workers if sum(f.size for fs in hf.values() for f in fs) >= parallel_min_bytes else 1)
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
            writer = write_topic_hour(
                catalog, tables[name], spec, hour, files, settings, quarantines[i], tr, pools[i], fast_run_lines
            )
            # Nothing commits to this table before its hours are all written, but a schema evolution reloads it.
            tables[name] = writer.table
            new_files.extend(writer.files)
        trs = [r.topics[name] for r in reports]
        props = snapshot_properties(keys, hours, run_id, **topic_counts(trs, keys))
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
    q_props = snapshot_properties(
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
        hour_us = epoch_micros(hour)
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
