"""Bronze ingestion of arrival hours: landing files -> typed Iceberg tables, exactly once per hour.

Each hour is planned first (:mod:`~logistics_platform.lib.bronze.increment`): appended to (only its new files read),
left unchanged, or replaced whole. For each bronze table the hours of a run are then committed in ONE Iceberg
commit (replaced hours' old files removed, new files added), never touching other hours; each hour keeps its own
data files. Data files are written batch by batch first (bounded memory,
:mod:`~logistics_platform.lib.bronze.topic_hour`), then committed (:mod:`~logistics_platform.lib.bronze.commit`,
retried on concurrent writers); a crash in between leaves the table as it was (the written files become orphans
that the maintenance job removes). ``bronze.ingest_log`` (one row per topic and hour, cumulative for an appended
hour) is committed LAST, so a logged hour is a committed hour.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from pyiceberg.catalog import Catalog
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.blocks import FAST_RUN_LINES
from logistics_platform.lib.bronze.commit import BeforeCommitHook, commit_hours
from logistics_platform.lib.bronze.increment import APPEND, NOT_INGESTED, REPLACE, UNCHANGED, HourPlan, plan_hours
from logistics_platform.lib.bronze.ingest_log import IngestLogEntry, log_row
from logistics_platform.lib.bronze.landing import LandingFile, fingerprint, fingerprint_of, list_hour_files
from logistics_platform.lib.bronze.pool import PARALLEL_MIN_BYTES, BlockPool
from logistics_platform.lib.bronze.reports import (
    PROP_FINGERPRINT,
    PROP_LINES,
    PROP_MODE,
    PROP_QUARANTINED,
    IngestReport,
    TopicReport,
    snapshot_properties,
    topic_counts,
)
from logistics_platform.lib.bronze.tables import ensure_bronze_tables
from logistics_platform.lib.bronze.topic_hour import write_topic_hour
from logistics_platform.lib.bronze.writer import BatchWriter
from logistics_platform.lib.connections import catalog_of
from logistics_platform.lib.timekeys import hour_key, hour_start
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
    replace: bool = False,
    before_commit: BeforeCommitHook | None = None,
    progress: Callable[[str], None] | None = None,
    parallel_min_bytes: int = PARALLEL_MIN_BYTES,
    fast_run_lines: int = FAST_RUN_LINES,
    catalog: Catalog | None = None,
) -> IngestReport:
    """Bring one arrival hour in every bronze table up to what the landing zone holds for it (idempotent).

    The range of one hour of :func:`ingest_hours`.
    """
    (report,) = ingest_hours(
        settings,
        [arrival_hour],
        run_id,
        replace=replace,
        before_commit=before_commit,
        progress=progress,
        parallel_min_bytes=parallel_min_bytes,
        fast_run_lines=fast_run_lines,
        catalog=catalog,
    )
    return report


def ingest_hours(
    settings: Settings,
    arrival_hours: Sequence[datetime],
    run_id: str | None = None,
    *,
    replace: bool = False,
    before_commit: BeforeCommitHook | None = None,
    progress: Callable[[str], None] | None = None,
    parallel_min_bytes: int = PARALLEL_MIN_BYTES,
    fast_run_lines: int = FAST_RUN_LINES,
    catalog: Catalog | None = None,
) -> list[IngestReport]:
    """Bring arrival hours in every bronze table up to what the landing zone holds for them (idempotent).

    Each hour is planned first (:mod:`~logistics_platform.lib.bronze.increment`): an hour ingested before that has
    only gained files gets the new files' rows appended, one with no new files is left alone, any other (new,
    changed, inconsistent, or every hour when ``replace``) is replaced whole. ONE commit per table for all of
    ``arrival_hours`` (any set of hours, in any order; reports come back in hour order): every hour is parsed and
    written first, then each table's commit swaps the replaced hours' files and adds the appended ones
    atomically, the ingest log last. Each hour keeps its own data files, so the rows, the files and a later
    re-ingest of any single hour are exactly what hour-by-hour ingest gives.

    Hours of at least ``parallel_min_bytes`` to read are parsed by ``settings.ingest_workers`` processes.
    Runs of ``fast_run_lines`` lines are first tried on the vectorised clean path (:mod:`lib.fastpath`), which
    declines any run it cannot prove identical; ``0`` parses every line with the per-line parser (the source of
    truth: same result, slower). ``catalog``: the run's open catalog (opened here when not handed down).
    """
    started = time.perf_counter()
    hours = sorted({hour_start(h) for h in arrival_hours})
    if not hours:
        raise ValueError("ingest_hours: no arrival hours given; pass at least one hour")
    keys = [hour_key(h) for h in hours]
    say = progress or log.info
    catalog = catalog_of(settings, catalog)
    tables = ensure_bronze_tables(catalog)
    landed = [
        {name: list_hour_files(settings.landing_dir, spec.topic, h) for name, spec in bs.TOPICS.items()} for h in hours
    ]
    plans = plan_hours(catalog, tables, hours, landed, replace)
    reports = [
        IngestReport(arrival_hour=h, partition_key=k, run_id=run_id, mode=p.mode, mode_reason=p.reason)
        for h, k, p in zip(hours, keys, plans, strict=True)
    ]
    for k, p in zip(keys, plans, strict=True):
        if p.mode != APPEND and p.reason != NOT_INGESTED:  # the usual cases need no word
            say(f"{k}: {p.mode} ({p.reason})")
    quarantines = [BatchWriter(tables[bs.QUARANTINE_TABLE], settings.ingest_batch_rows) for _ in hours]
    pools = [
        BlockPool(
            settings.ingest_workers if sum(f.size for fs in p.read.values() for f in fs) >= parallel_min_bytes else 1
        )
        for p in plans
    ]
    label = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
    for name, spec in bs.TOPICS.items():
        new_files: list[DataFile] = []
        for i, hour in enumerate(hours):
            tr = TopicReport(table=name, topic=spec.topic, mode=plans[i].mode)
            reports[i].topics[name] = tr
            files = plans[i].read.get(name, [])
            tr.read_files = [(f.relpath, f.size) for f in files]
            if files:
                # Per hour only to the module log: in a run's event log each line is a stored event, and a day's
                # range would add one per table and hour; the table's line below sums them.
                log.debug("%s %s: reading %d files (%s)", keys[i], spec.identifier, len(files), plans[i].mode)
                writer = write_topic_hour(
                    catalog, tables[name], spec, hour, files, settings, quarantines[i], tr, pools[i], fast_run_lines
                )
                # Nothing commits to this table before its hours are all written, but a schema evolution reloads it.
                tables[name] = writer.table
                new_files.extend(writer.files)
                tr.written = [f.file_path for f in writer.files]
            tr.read_lines, tr.read_rows, tr.read_tombstones = tr.lines, tr.rows, tr.tombstones
            tr.read_quarantined = tr.quarantined
            _whole_hour(tr, landed[i][name], plans[i].logged.get(name))
        trs = [r.topics[name] for r in reports]
        done = [i for i, p in enumerate(plans) if p.mode != UNCHANGED]
        props = (
            snapshot_properties(
                [keys[i] for i in done],
                [hours[i] for i in done],
                run_id,
                **topic_counts([trs[i] for i in done], [keys[i] for i in done]),
            )
            if done
            else {}
        )
        replaced = [p.hour for p in plans if p.mode == REPLACE]
        keep = _appended(plans, name, [t.written for t in trs])
        snapshot_id, attempts = _commit(
            catalog, spec.identifier, "_arrival_hour", replaced, keep, new_files, props, before_commit
        )
        for t in trs:
            t.snapshot_id, t.commit_attempts = snapshot_id, attempts
        damaged = sum(len(t.corrupt_files) for t in trs)
        note = f", {damaged} corrupt files (see bronze.quarantine)" if damaged else ""
        say(
            f"{label} {spec.identifier}: {_modes(plans)} {sum(len(t.read_files) for t in trs):,} files, "
            f"{sum(t.read_lines for t in trs):,} lines -> {sum(t.read_rows for t in trs):,} rows, "
            f"{sum(t.read_quarantined for t in trs):,} quarantined, {sum(t.read_tombstones for t in trs):,} "
            f"tombstones{note}; snapshot {snapshot_id}"
        )
    _finish_hours(catalog, hours, keys, run_id, plans, quarantines, reports, tables, before_commit)
    elapsed = time.perf_counter() - started
    for r in reports:
        r.duration_seconds = elapsed
    say(
        f"{label}: {_modes(plans)} {sum(r.read_files for r in reports):,} files, "
        f"{sum(r.read_lines for r in reports):,} lines read; the hour{'s' if len(hours) > 1 else ''} now "
        f"{sum(r.lines for r in reports):,} lines -> {sum(r.rows for r in reports):,} rows, "
        f"{sum(r.quarantined for r in reports):,} quarantined, {sum(r.tombstones for r in reports):,} tombstones "
        f"in {elapsed:.1f}s"
    )
    return reports


def _modes(plans: Sequence[HourPlan]) -> str:
    """The hour's mode, or for a range how many hours took each (``3 append, 1 replace``)."""
    counts = Counter(p.mode for p in plans)
    if len(plans) == 1:
        return plans[0].mode
    return ", ".join(f"{n} {mode}" for mode, n in sorted(counts.items()))


def _whole_hour(tr: TopicReport, landed: Sequence[LandingFile], logged: IngestLogEntry | None) -> None:
    """Turn ``tr``'s counts of what was read into the whole hour's: the logged counts before an append added."""
    tr.files = [(f.relpath, f.size) for f in landed]
    tr.fingerprint = fingerprint(landed)
    tr.bytes = sum(f.size for f in landed)
    if logged is not None:
        tr.lines += logged.lines
        tr.rows += logged.rows
        tr.quarantined += logged.quarantined
        tr.tombstones += logged.tombstones
        tr.late_events += logged.late_events


def _commit(
    catalog: Catalog,
    identifier: str,
    hour_column: str,
    replace: Sequence[datetime],
    keep: Mapping[datetime, frozenset[str]],
    new_files: list[DataFile],
    props: dict[str, str],
    before_commit: BeforeCommitHook | None,
) -> tuple[int | None, int]:
    """One table's commit of the run (:func:`commit.commit_hours`); no commit when it has nothing to write."""
    if not replace and not new_files:
        snap = catalog.load_table(identifier).current_snapshot()
        return (snap.snapshot_id if snap else None), 0
    return commit_hours(catalog, identifier, hour_column, replace, keep, new_files, props, before_commit)


def _appended(
    plans: Sequence[HourPlan], name: str, written: Sequence[Sequence[object]]
) -> dict[datetime, frozenset[str]]:
    """The append hours that write files to table ``name``, with the files their append was planned on."""
    return {p.hour: p.base[name] for p, w in zip(plans, written, strict=True) if p.mode == APPEND and w}


def _finish_hours(
    catalog: Catalog,
    hours: Sequence[datetime],
    keys: Sequence[str],
    run_id: str | None,
    plans: Sequence[HourPlan],
    quarantines: Sequence[BatchWriter],
    reports: Sequence[IngestReport],
    tables: dict[str, Table],
    before_commit: BeforeCommitHook | None,
) -> None:
    """Commit the quarantine, then the ingest log: a log row is the proof that its hour is complete."""
    for q, r in zip(quarantines, reports, strict=True):
        q.flush()
        r.quarantine_written = [f.file_path for f in q.files]
    done = [i for i, p in enumerate(plans) if p.mode != UNCHANGED]
    d_keys, d_hours = [keys[i] for i in done], [hours[i] for i in done]
    fingerprints = [fingerprint_of([rel for t in reports[i].topics.values() for rel in t.files]) for i in done]
    q_props = (
        snapshot_properties(
            d_keys,
            d_hours,
            run_id,
            **{
                PROP_FINGERPRINT: fingerprints[0] if len(done) == 1 else dict(zip(d_keys, fingerprints, strict=True)),
                PROP_MODE: plans[done[0]].mode if len(done) == 1 else {keys[i]: plans[i].mode for i in done},
                PROP_LINES: sum(reports[i].lines for i in done),
                PROP_QUARANTINED: sum(reports[i].quarantined for i in done),
            },
        )
        if done
        else {}
    )
    replaced = [p.hour for p in plans if p.mode == REPLACE]
    q_id = f"{bs.NAMESPACE}.{bs.QUARANTINE_TABLE}"
    q_files = [f for q in quarantines for f in q.files]
    q_keep = _appended(plans, bs.QUARANTINE_TABLE, [q.files for q in quarantines])
    q_snapshot, _ = _commit(catalog, q_id, "_arrival_hour", replaced, q_keep, q_files, q_props, before_commit)

    log_files: list[DataFile] = []
    for i in done:
        log_writer = BatchWriter(tables[bs.INGEST_LOG_TABLE], 1000)  # one file per hour, as hour by hour
        for t in reports[i].topics.values():
            if not t.files:
                continue  # an hour a topic did not land in has nothing to account for
            counts = (t.bytes, t.lines, t.rows, t.quarantined, t.tombstones, t.late_events)
            log_writer.add(log_row(t.topic, hours[i], t.files, t.fingerprint, counts))
        log_writer.flush()
        log_files.extend(log_writer.files)
    # An appended hour's log rows are replaced by the cumulative ones (metadata-only: one file per hour), on
    # condition that nobody changed them since the plan.
    log_keep = {p.hour: p.base[bs.INGEST_LOG_TABLE] for p in plans if p.mode == APPEND}
    log_snapshot, _ = _commit(
        catalog,
        f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}",
        "arrival_hour",
        d_hours,
        log_keep,
        log_files,
        q_props,
        before_commit,
    )
    for report in reports:
        report.quarantine_snapshot_id = q_snapshot
        report.ingest_log_snapshot_id = log_snapshot
