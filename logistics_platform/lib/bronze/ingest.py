"""Bronze ingestion of arrival hours: landing files -> typed Iceberg tables, exactly once per hour; the steps and
why: docs/internals/ingest.md."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypedDict, Unpack

from pyiceberg.catalog import Catalog
from pyiceberg.manifest import DataFile

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.blocks import FAST_RUN_LINES
from logistics_platform.lib.bronze.commit import BeforeCommitHook, commit_hours
from logistics_platform.lib.bronze.increment import APPEND, NOT_INGESTED, REPLACE, UNCHANGED, HourPlan, plan_hours
from logistics_platform.lib.bronze.ingest_log import IngestLogEntry, log_row
from logistics_platform.lib.bronze.landing import LandingFile, fingerprint, fingerprint_of, list_hour_files, topic_specs
from logistics_platform.lib.bronze.pool import PARALLEL_MIN_BYTES, BlockPool
from logistics_platform.lib.bronze.reports import (
    PROP_FINGERPRINT,
    PROP_LINES,
    PROP_MODE,
    PROP_QUARANTINED,
    IngestReport,
    TopicReport,
    per_hour,
    snapshot_properties,
    topic_counts,
)
from logistics_platform.lib.bronze.tables import ensure_bronze_tables, hour_column
from logistics_platform.lib.bronze.topic_hour import write_topic_hour
from logistics_platform.lib.bronze.writer import BatchWriter
from logistics_platform.lib.connections import catalog_of
from logistics_platform.lib.timekeys import hour_key, hour_start
from logistics_platform.settings import Settings

log = logging.getLogger(__name__)


class IngestOptions(TypedDict, total=False):
    """How :func:`ingest_hours` runs (every key optional)."""

    run_id: str | None
    replace: bool  # re-ingest every hour whole instead of appending new files
    before_commit: BeforeCommitHook | None
    progress: Callable[[str], None] | None  # where progress lines go (default: this module's log)
    parallel_min_bytes: int  # hours with this much to read are parsed by ``settings.ingest_workers`` processes
    fast_run_lines: int  # lines per try of the vectorised clean path; 0: every line through the per-line parser
    catalog: Catalog | None  # the run's open catalog (opened here when not handed down)


def consecutive_ranges(hours: Sequence[datetime], max_hours: int) -> list[list[datetime]]:
    """The distinct hours, sorted, in runs of at most ``max_hours`` consecutive hours (a gap starts a new run)."""
    out: list[list[datetime]] = []
    for hour in sorted({hour_start(h) for h in hours}):
        if out and hour - out[-1][-1] == timedelta(hours=1) and len(out[-1]) < max(1, max_hours):
            out[-1].append(hour)
        else:
            out.append([hour])
    return out


def ingest_hour(settings: Settings, arrival_hour: datetime, **options: Unpack[IngestOptions]) -> IngestReport:
    """Bring one arrival hour in every bronze table up to what the landing zone holds for it (idempotent)."""
    (report,) = ingest_hours(settings, [arrival_hour], **options)
    return report


def ingest_hours(
    settings: Settings, arrival_hours: Sequence[datetime], **options: Unpack[IngestOptions]
) -> list[IngestReport]:
    """Bring arrival hours (any set, any order) in every bronze table up to the landing zone (idempotent); reports
    come back in hour order, rows and files are exactly what hour-by-hour ingest gives."""
    started = time.perf_counter()
    hours = sorted({hour_start(h) for h in arrival_hours})
    if not hours:
        raise ValueError("ingest_hours: no arrival hours given; pass at least one hour")
    run_id = options.get("run_id")
    say = options.get("progress") or log.info
    catalog = catalog_of(settings, options.get("catalog"))
    specs = topic_specs(settings.landing_dir)
    landed = [{t: list_hour_files(settings.landing_dir, s.topic, h) for t, s in specs.items()} for h in hours]
    # A topic outside the contract takes part in the hours it landed in (its table is created then).
    specs = {t: s for t, s in specs.items() if t in bs.TOPICS or any(fs[t] for fs in landed)}
    tables = ensure_bronze_tables(catalog, specs)
    plans = plan_hours(catalog, tables, hours, landed, options.get("replace", False))
    keys = [hour_key(h) for h in hours]
    reports = [
        IngestReport(arrival_hour=h, partition_key=k, run_id=run_id, mode=p.mode, mode_reason=p.reason)
        for h, k, p in zip(hours, keys, plans, strict=True)
    ]
    for k, p in zip(keys, plans, strict=True):
        if p.mode != APPEND and p.reason != NOT_INGESTED:  # the usual cases need no word
            say(f"{k}: {p.mode} ({p.reason})")
    done = [i for i, p in enumerate(plans) if p.mode != UNCHANGED]
    d_keys, d_hours = [keys[i] for i in done], [hours[i] for i in done]
    replaced = [p.hour for p in plans if p.mode == REPLACE]
    quarantines = [BatchWriter(tables[bs.QUARANTINE_TABLE], settings.ingest_batch_rows) for _ in hours]
    min_bytes = options.get("parallel_min_bytes", PARALLEL_MIN_BYTES)
    pools = [
        BlockPool(settings.ingest_workers if sum(f.size for fs in p.read.values() for f in fs) >= min_bytes else 1)
        for p in plans
    ]
    label = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
    fast = options.get("fast_run_lines", FAST_RUN_LINES)
    hook_commit = partial(commit_hours, catalog, before_commit=options.get("before_commit"))
    commit_seconds: dict[str, float] = {}  # table -> seconds of its one commit for all the hours, attempts included

    def commit(name: str, *args: Any) -> tuple[int | None, int]:
        """:func:`commit_hours` to bronze table ``name`` (replaced hours, files, properties, kept hours), timed."""
        planned_on = _planned_on(plans, name)
        began = time.perf_counter()
        out = hook_commit(f"{bs.NAMESPACE}.{name}", hour_column(name), *args, planned_on=planned_on)
        commit_seconds[name] = round(time.perf_counter() - began, 3)
        return out

    for name, spec in specs.items():
        new_files: list[DataFile] = []
        for i, hour in enumerate(hours):
            tr = reports[i].topics[name] = TopicReport(table=name, topic=spec.topic, mode=plans[i].mode)
            files = plans[i].read.get(name, [])
            tr.read_files = [(f.relpath, f.size) for f in files]
            if files:
                log.debug("%s %s: reading %d files (%s)", keys[i], spec.identifier, len(files), plans[i].mode)
                q, pool = quarantines[i], pools[i]
                writer = write_topic_hour(catalog, tables[name], spec, hour, files, settings, q, tr, pool, fast)
                tables[name] = writer.table  # reloaded by a schema evolution
                new_files.extend(writer.files)
                tr.written = [f.file_path for f in writer.files]
            _whole_hour(tr, landed[i][name], plans[i].logged.get(name))
        trs = [r.topics[name] for r in reports]
        counts = topic_counts([trs[i] for i in done], d_keys)
        props = snapshot_properties(d_keys, d_hours, run_id, **counts) if done else {}
        keep = _appended(plans, name, [t.written for t in trs])
        snapshot_id, attempts = commit(name, replaced, new_files, props, keep)
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

    # The quarantine, then the ingest log: a log row is the proof that its hour is complete.
    for q, r in zip(quarantines, reports, strict=True):
        q.flush()
        r.quarantine_written = [f.file_path for f in q.files]
    fingerprints = [fingerprint_of([rel for t in reports[i].topics.values() for rel in t.files]) for i in done]
    q_counts = {
        PROP_FINGERPRINT: per_hour(d_keys, fingerprints),
        PROP_MODE: per_hour(d_keys, [plans[i].mode for i in done]),
        PROP_LINES: sum(reports[i].lines for i in done),
        PROP_QUARANTINED: sum(reports[i].quarantined for i in done),
    }
    q_props = snapshot_properties(d_keys, d_hours, run_id, **q_counts) if done else {}
    q_files = [f for q in quarantines for f in q.files]
    q_keep = _appended(plans, bs.QUARANTINE_TABLE, [q.files for q in quarantines])
    q_snapshot, _ = commit(bs.QUARANTINE_TABLE, replaced, q_files, q_props, q_keep)
    log_files: list[DataFile] = []
    for i in done:
        log_writer = BatchWriter(tables[bs.INGEST_LOG_TABLE], 1000)  # one file per hour, as hour by hour
        for t in reports[i].topics.values():
            if t.files:  # an hour a topic did not land in has nothing to account for
                log_writer.add(log_row(hours[i], t))
        log_writer.flush()
        log_files.extend(log_writer.files)
    # An appended hour's log rows are replaced by the cumulative ones, on condition nobody changed them since the plan.
    log_keep = {p.hour: p.base[bs.INGEST_LOG_TABLE] for p in plans if p.mode == APPEND}
    log_snapshot, _ = commit(bs.INGEST_LOG_TABLE, d_hours, log_files, q_props, log_keep)
    elapsed = time.perf_counter() - started
    for r in reports:
        r.quarantine_snapshot_id, r.ingest_log_snapshot_id, r.duration_seconds = q_snapshot, log_snapshot, elapsed
        r.commit_seconds = commit_seconds
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
    if len(plans) == 1:
        return plans[0].mode
    return ", ".join(f"{n} {mode}" for mode, n in sorted(Counter(p.mode for p in plans).items()))


def _whole_hour(tr: TopicReport, landed: Sequence[LandingFile], logged: IngestLogEntry | None) -> None:
    """Keep ``tr``'s counts as what was read, and make them the whole hour's: the logged counts before an append."""
    tr.read_lines, tr.read_rows, tr.read_tombstones = tr.lines, tr.rows, tr.tombstones
    tr.read_quarantined = tr.quarantined
    tr.files = [(f.relpath, f.size) for f in landed]
    tr.fingerprint = fingerprint(landed)
    tr.bytes = sum(f.size for f in landed)
    if logged is not None:
        for count in ("lines", "rows", "quarantined", "tombstones", "late_events"):
            setattr(tr, count, getattr(tr, count) + getattr(logged, count))


def _planned_on(plans: Sequence[HourPlan], name: str) -> int | None:
    """The snapshot of table ``name`` that the appends were planned on (None: no append, or none to rely on)."""
    seen = {p.planned_on[name] for p in plans if p.mode == APPEND and name in p.planned_on}
    return seen.pop() if len(seen) == 1 else None


def _appended(
    plans: Sequence[HourPlan], name: str, written: Sequence[Sequence[object]]
) -> dict[datetime, frozenset[str]]:
    """The append hours that write files to table ``name``, with the files their append was planned on."""
    return {p.hour: p.base[name] for p, w in zip(plans, written, strict=True) if p.mode == APPEND and w}
