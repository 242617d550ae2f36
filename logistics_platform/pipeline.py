"""`logistics-platform run`: the landed hours that changed, then downstream, as Dagster runs (internals/core.md)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from logistics_platform.defs.bronze.assets import INGEST_MODE_TAG
from logistics_platform.defs.constants import (
    BRONZE_GROUP,
    CAPTURE_GROUP,
    INGEST_JOB,
    INGEST_LOG_KEY,
    LANDING_GROUP,
    MAINTENANCE_GROUP,
    TRANSFORM_GROUPS,
    TRANSFORM_JOB,
)
from logistics_platform.defs.operate.transform_sensor import pending_transform_hours
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.lib.connections import catalog_of, connect, preflight
from logistics_platform.lib.operate.landing_watch import RANGE_END_TAG, RANGE_START_TAG
from logistics_platform.lib.operate.transform_pending import KEEP_DAYS
from logistics_platform.lib.timekeys import hour_key, parse_hour_key
from logistics_platform.lib.transform.arrival_window import ArrivalWindow
from logistics_platform.lib.transform.spark import is_spark
from logistics_platform.settings import Settings, environment

# The hourly jobs are the operate domain's; only the assets outside any arrival-hour partitioning get one here.
UNPARTITIONED_JOB = "run_downstream_unpartitioned"
# Groups that `run` does not execute: maintenance is nightly, landing assets are external, capture is its own command.
EXCLUDED_GROUPS = (MAINTENANCE_GROUP, LANDING_GROUP, CAPTURE_GROUP)

EVENT_BATCH_VARIABLE = "DAGSTER_EVENT_BATCH_SIZE"
# Left-out hours and folders the summary lists one by one (the rest are counted).
SKIPPED_SHOWN = 20

# Step-level events go to the run's event log (the UI shows them); the terminal gets warnings and our progress.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


class PipelineError(RuntimeError):
    """The run cannot start; the message says what is wrong and what to do."""


@dataclass
class RunRecord:
    job: str
    partition: str
    run_id: str
    success: bool
    error: str = ""  # the first failed step and its root cause, one line
    seconds: float = 0.0  # wall clock of the run, its creation (Dagster's planned events) included


@dataclass
class Summary:
    """What the main job did: its hours, runs and the row counts after it (`run` prints it, cli/render.py)."""

    partitions: list[str]
    runs: list[RunRecord] = field(default_factory=list)
    bronze: dict[str, int] = field(default_factory=dict)
    marts: dict[str, int] = field(default_factory=dict)
    counts_error: str = ""  # why the row counts could not be read (the summary is printed anyway)
    skipped: dict[str, str] = field(default_factory=dict)  # landed hour, folder or file left out -> why
    up_to_date: list[str] = field(default_factory=list)  # landed hours whose files bronze.ingest_log already records

    @property
    def ok(self) -> bool:
        return all(r.success for r in self.runs) and not self.counts_error


def batched_events(instance: dg.DagsterInstance, settings: Settings) -> contextlib.AbstractContextManager[None]:
    """On a PostgreSQL instance (SQLite never batches), ``DAGSTER_EVENT_BATCH_SIZE`` for the runs inside."""
    from dagster_postgres import PostgresEventLogStorage

    if not isinstance(instance.event_log_storage, PostgresEventLogStorage):
        return contextlib.nullcontext()
    return environment({EVENT_BATCH_VARIABLE: str(settings.dagster_event_batch_size)})


def landed_partitions(
    settings: Settings, now: datetime, folders: Sequence[tuple[str, datetime]] | None = None
) -> tuple[list[str], dict[str, str]]:
    """Every landed arrival hour (of ``folders``, default all) that is a partition at ``now``; what was left out."""
    from logistics_platform.lib.bronze.landing import list_arrival_hours, list_hour_files
    from logistics_platform.lib.bronze.unread import unread_files, unread_in_hour
    from logistics_platform.lib.operate.landing_watch import hour_folders, partition_hours

    if not settings.landing_dir.exists():
        raise PipelineError(
            f"landing zone {settings.landing_dir} does not exist: run `logistics-platform generate` or set LANDING_DIR"
        )
    if folders is None:
        landed = [hour_key(h) for h in list_arrival_hours(settings.landing_dir)]
        unread = unread_files(settings.landing_dir)
    else:
        landed = sorted({hour_key(h) for t, h in folders if list_hour_files(settings.landing_dir, t, h)})
        unread = {p: why for t, h in folders for p, why in unread_in_hour(settings.landing_dir, t, h).items()}
    keys, skipped = partition_hours(landed, settings.partitions_start, now)
    folders_out = hour_folders(settings.landing_dir)[1]
    skipped.update(folders_out)
    # Files the ingest does not read; those inside a folder left out above go with the folder.
    skipped.update({p: why for p, why in unread.items() if not any(p.startswith(f"{f}/") for f in folders_out)})
    if not keys:
        reasons = "; ".join(f"{what}: {why}" for what, why in list(skipped.items())[:SKIPPED_SHOWN])
        left_out = f" (left out: {reasons})" if reasons else ""
        raise PipelineError(f"no arrival hours under {settings.landing_dir}/topics to ingest{left_out}")
    return keys, skipped


def _jobs(defs: dg.Definitions) -> tuple[dg.Definitions, bool, bool]:
    """The definitions plus the ad-hoc job for unpartitioned downstream assets, and which jobs have assets."""
    graph = defs.resolve_asset_graph()
    nodes = [graph.get(k) for k in graph.materializable_asset_keys]
    nodes = [n for n in nodes if n.group_name not in (*EXCLUDED_GROUPS, BRONZE_GROUP)]
    partitioned = [n for n in nodes if n.partitions_def is not None]
    # Unpartitioned assets of the transform groups (the published marts) run in the transform job.
    unpartitioned = [n.key for n in nodes if n.partitions_def is None and n.group_name not in TRANSFORM_GROUPS]
    stray = [n.key.to_user_string() for n in partitioned if n.group_name not in TRANSFORM_GROUPS]
    if stray:  # the operate transform job selects by group: a partitioned asset elsewhere would be skipped
        raise PipelineError(
            f"partitioned assets outside the groups {', '.join(TRANSFORM_GROUPS)}: {', '.join(stray)}; "
            "put them in one of those groups or add their group to TRANSFORM_GROUPS in defs/constants.py"
        )
    jobs = [dg.define_asset_job(UNPARTITIONED_JOB, selection=dg.AssetSelection.assets(*unpartitioned))]
    return dg.Definitions.merge(defs, dg.Definitions(jobs=jobs)), bool(partitioned), bool(unpartitioned)


def hour_ranges(keys: Sequence[str], max_hours: int) -> list[list[str]]:
    """The distinct partition keys, sorted and cut into runs of consecutive hours of at most ``max_hours`` each."""
    from logistics_platform.lib.bronze.ingest import consecutive_ranges

    return [[hour_key(h) for h in run] for run in consecutive_ranges([parse_hour_key(k) for k in keys], max_hours)]


@dataclass(frozen=True)
class Progress:
    """Where the main job is: ingested hours and lines so far, of how many hours."""

    hours_done: int
    hours_total: int
    lines: int
    elapsed_seconds: float  # of the ingest (the line rate's time base)
    stage: str = "ingest"
    stage_seconds: float = 0.0  # time in a later stage so far (the terminal's line counts it up)


def run_pipeline(
    settings: Settings,
    partitions: Sequence[str] | None = None,
    log: Callable[[str], None] = lambda _m: None,
    progress: Callable[[Progress], None] = lambda _p: None,
    verbose: bool = False,
    full: bool = False,
    replace: bool = False,
) -> Summary:
    """Ingest ``partitions`` (default: the landed hours new or changed since their ingest, all with ``full``) in runs
    of consecutive hours (``replace``: read whole), then build downstream once; ``verbose``: show Dagster's logs."""
    from logistics_platform.definitions import build_definitions
    from logistics_platform.lib.operate import progress as plan
    from logistics_platform.lib.operate.landing_watch import scan_landing

    if partitions is not None:  # validated before anything is created: a typo is refused before anything runs
        valid = set(arrival_hour_partitions(settings).get_partition_keys())
        if bad := [k for k in partitions if k not in valid]:
            raise PipelineError(
                f"not arrival-hour partitions: {', '.join(bad[:5])}; keys look like 2026-11-01-13:00 and start at "
                f"PARTITIONS_START={settings.partitions_start}"
            )
        keys = list(partitions)
    elif not settings.landing_dir.exists():
        landed_partitions(settings, datetime.now(UTC))  # raises: no landing zone
    # A misconfigured catalog or warehouse fails here in one line, not as failed (or retried) runs of every hour.
    preflight(settings)
    catalog = catalog_of(settings)  # tables and namespaces exist before parallel runs
    skipped: dict[str, str] = {}
    up_to_date: list[str] = []
    if partitions is None:
        # Not `full`: the recent hours and the never-logged ones, so that the look does not grow with the history.
        folders = None if full else plan.folders_to_look_at(catalog, settings.landing_dir)
        keys, skipped = landed_partitions(settings, datetime.now(UTC), folders)
        if not full:  # the hours new or changed since their ingest, and the up-to-date ones
            scan = scan_landing(settings.landing_dir, lookback_days=None, hours=keys)
            keys, up_to_date = plan.changed_hours(keys, scan, plan.read_ingest_log(catalog, keys), settings.landing_dir)
    defs, has_partitioned, has_unpartitioned = _jobs(build_definitions(settings))
    # Without DAGSTER_HOME (e.g. a test) the runs execute in a throwaway instance (see docs/internals/core.md).
    instance = dg.DagsterInstance.ephemeral() if settings.dagster_home is None else dg.DagsterInstance.get()
    summary = Summary(partitions=keys, skipped=skipped, up_to_date=up_to_date)

    run_config = {} if verbose else QUIET

    def execute(job_name: str, label: str, **kwargs: Any) -> dg.ExecuteInProcessResult:
        job = defs.resolve_job_def(job_name)
        began = time.monotonic()
        with batched_events(instance, settings):
            result = job.execute_in_process(run_config=run_config, instance=instance, raise_on_error=False, **kwargs)
        seconds = time.monotonic() - began
        summary.runs.append(RunRecord(job_name, label, result.run_id, result.success, _failure(result), seconds))
        return result

    started = time.monotonic()
    done = lines = 0
    progress(Progress(0, len(keys), 0, 0.0))
    mode = {INGEST_MODE_TAG: "replace"} if replace else {}
    for chunk in hour_ranges(keys, settings.ingest_max_hours_per_run):
        label = chunk[0] if len(chunk) == 1 else f"{chunk[0]}..{chunk[-1]}"
        if len(chunk) == 1:
            result = execute(INGEST_JOB, label, partition_key=chunk[0], tags=mode)
        else:
            result = execute(INGEST_JOB, label, tags={RANGE_START_TAG: chunk[0], RANGE_END_TAG: chunk[-1], **mode})
        done += len(chunk)
        lines += _ingested_lines(result)
        if not result.success:
            log(f"ingest {label}: FAILED")
        progress(Progress(done, len(keys), lines, time.monotonic() - started))
    # Hours ingested in the last KEEP_DAYS that no transform run built since (a failed transform, a stopped sensor).
    waiting = list(pending_transform_hours(instance, None, within_days=KEEP_DAYS)[0])
    if has_partitioned and (keys or waiting):
        ordered = sorted({*keys, *waiting})
        # One run over the days of these hours, building exactly their window (the days' other hours left as they are).
        window = ArrivalWindow.of_hours(ordered[0], ordered[-1])
        progress(Progress(done, len(keys), lines, time.monotonic() - started, "transforming"))
        ok = execute(TRANSFORM_JOB, window.label, tags=window.run_tags()).success
        log(f"transform {ordered[0]} .. {ordered[-1]}: {'ok' if ok else 'FAILED'}")
    if has_unpartitioned:
        ok = execute(UNPARTITIONED_JOB, "-").success
        log(f"downstream (unpartitioned): {'ok' if ok else 'FAILED'}")
    summary.bronze, summary.marts, summary.counts_error = table_counts(settings)
    return summary


def _ingested_lines(result: dg.ExecuteInProcessResult) -> int:
    """Landed lines an ingest run read (its ingest-log materialization; a range records one per hour)."""
    for event in result.get_asset_materialization_events():
        if event.asset_key == INGEST_LOG_KEY:
            value = event.materialization.metadata.get("lines")
            return int(value.value) if isinstance(value, dg.IntMetadataValue) and value.value is not None else 0
    return 0


def _failure(result: dg.ExecuteInProcessResult) -> str:
    """``step: root cause`` of the run's first failed step, on one line ("" when the run succeeded)."""
    for event in result.get_step_failure_events():
        error = event.step_failure_data.error
        while error is not None and error.cause is not None:
            error = error.cause
        message = " ".join((error.message if error else "").split())
        return f"{event.step_key}: {message[:300]}"
    return ""


def table_counts(settings: Settings) -> tuple[dict[str, int], dict[str, int], str]:
    """Row counts of the bronze tables and of the marts, and why some could not be read ("" if all); never raises."""
    counts: dict[str, dict[str, int]] = {"bronze": {}, "marts": {}}
    errors: list[str] = []
    for namespace, in_duckdb in (("bronze", False), ("marts", not is_spark(settings))):
        try:
            if in_duckdb:
                _duckdb_mart_counts(settings, counts[namespace])
            else:
                _iceberg_counts(settings, namespace, counts[namespace])
        except Exception as exc:
            where = f" ({settings.duckdb_path})" if in_duckdb else ""
            errors.append(f"{namespace}{where}: {type(exc).__name__}: {exc}")
    return counts["bronze"], counts["marts"], " ".join("; ".join(errors).split())[:600]


def _iceberg_counts(settings: Settings, namespace: str, counts: dict[str, int]) -> None:
    """Row count of every table of an Iceberg namespace (opening the catalog creates it) into ``counts``, from its
    snapshot summary (no manifest read: it does not grow with the history)."""
    catalog = catalog_of(settings)
    for _ns, name in sorted(catalog.list_tables(namespace)):
        snapshot = catalog.load_table(f"{namespace}.{name}").current_snapshot()
        counts[name] = int((snapshot.summary or {}).get("total-records", 0)) if snapshot else 0


def _duckdb_mart_counts(settings: Settings, counts: dict[str, int]) -> None:
    """Row count of every table of the DuckDB file's ``marts`` schema into ``counts`` (none before the first build)."""
    if not settings.duckdb_path.exists():
        return
    with connect(settings.duckdb_path, read_only=True, settings=settings) as con:
        tables = "select table_name from information_schema.tables where table_schema = 'marts' order by 1"
        for (name,) in con.execute(tables).fetchall():
            counts[name] = con.execute(f'select count(*) from marts."{name}"').fetchone()[0]  # type: ignore[index]
