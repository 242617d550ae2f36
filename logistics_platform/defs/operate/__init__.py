"""Operating the platform: the jobs, sensors and schedules that keep it running, freshness, backlog, alerts.

Thin Dagster glue; the decisions live in ``lib.landing_watch``, ``lib.progress`` and ``lib.alerts``.
"""

import json
import warnings
from collections.abc import Iterator, Sequence
from datetime import UTC, timedelta
from typing import Any

import dagster as dg
from dagster import AssetExecutionContext
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

from logistics_platform.defs.constants import (
    BRONZE_DATA_TABLES,
    CHECKED_TABLES,
    HEALTH_CHECK,
    INGEST_JOB,
    INGEST_LOG_KEY,
    MARTS,
    TRANSFORM_GROUPS,
    TRANSFORM_JOB,
    TRIGGER_TAG,
)
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.lib.operate import alerts
from logistics_platform.lib.operate.landing_watch import (
    combine_fingerprints,
    dump_cursor,
    hour_fingerprints,
    hours_to_reconcile,
    ingest_run_key,
    load_cursor,
    plan_ingest_requests,
    scan_landing,
    stale_topics,
)
from logistics_platform.settings import Settings

BACKLOG_KEY = dg.AssetKey(["operations", "pipeline_backlog"])
# Backlog above this many pending arrival hours (or marts this many hours behind bronze) is a warning: the
# schedule re-ingests the last two hours every hour, so more than that means runs are failing or stopped.
BACKLOG_WARN_HOURS = 3
BATCH_TAG = "logistics/transform_batch"
TRANSFORM_ATTEMPTS = 3
_FAILED = AssetCheckExecutionRecordStatus.FAILED
ACTIVE_RUN_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def _sensor_status(settings: Settings) -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if settings.automation_running else dg.DefaultSensorStatus.STOPPED


def _schedule_status(settings: Settings) -> dg.DefaultScheduleStatus:
    return dg.DefaultScheduleStatus.RUNNING if settings.automation_running else dg.DefaultScheduleStatus.STOPPED


def _valid_hours(settings: Settings, hours: dict[str, str]) -> dict[str, str]:
    """Hours that are partitions (landed files older than PARTITIONS_START are not ingested)."""
    start = arrival_hour_partitions(settings).start.strftime("%Y-%m-%d-%H:%M")
    return {h: fp for h, fp in hours.items() if h >= start}


def build_jobs(
    settings: Settings, freshness_checks: Sequence[dg.AssetChecksDefinition] = ()
) -> tuple[UnresolvedAssetJobDefinition, UnresolvedAssetJobDefinition]:
    partitions = arrival_hour_partitions(settings)
    # Keep the hot path lean: freshness checks run from their own sensor and table health from the nightly
    # maintenance job; the checks that belong to an asset (accounting, dbt tests) still run with it.
    elsewhere = dg.AssetSelection.checks(
        *[key for checks_def in freshness_checks for key in checks_def.check_keys],
        *[dg.AssetCheckKey(key, HEALTH_CHECK) for key in CHECKED_TABLES.values()],
    )
    ingest = dg.define_asset_job(
        INGEST_JOB,
        selection=dg.AssetSelection.groups("bronze") - elsewhere,
        partitions_def=partitions,
        description="Ingest arrival hours from the landing zone into the bronze Iceberg tables.",
        tags={"logistics/layer": "bronze"},
    )
    transform = dg.define_asset_job(
        TRANSFORM_JOB,
        selection=dg.AssetSelection.groups(*TRANSFORM_GROUPS) - elsewhere,
        partitions_def=partitions,
        description="Build the dbt staging, intermediate and marts models (and publish the marts) for a range "
        "of arrival hours in one run.",
        tags={"logistics/writer": "duckdb", "logistics/layer": "dbt"},
    )
    return ingest, transform


# ---------------------------------------------------------------- landing sensor + hourly schedule


def build_landing_sensor(settings: Settings, job: UnresolvedAssetJobDefinition) -> dg.SensorDefinition:
    @dg.sensor(
        name="landing_sensor",
        job=job,
        minimum_interval_seconds=60,
        default_status=_sensor_status(settings),
        description=(
            "Requests an ingest of an arrival hour when its files appear in LANDING_DIR, and again when its "
            "file set changes (delayed upload). Cursor: hour -> fingerprint of the last requested file set."
        ),
    )
    def landing_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        landed = _valid_hours(settings, hour_fingerprints(scan_landing(settings.landing_dir)))
        requests, cursor = plan_ingest_requests(landed, load_cursor(context.cursor))
        if not requests:
            return dg.SkipReason(f"{len(landed)} landed hours in the window, none new or changed")
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=r.run_key,
                    partition_key=r.hour,
                    tags={TRIGGER_TAG: "landing_sensor", "logistics/reason": r.reason},
                )
                for r in requests
            ],
            cursor=dump_cursor(cursor),
        )

    return landing_sensor


def build_hourly_ingest_schedule(settings: Settings, job: UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    @dg.schedule(
        name="hourly_ingest",
        cron_schedule="5 * * * *",
        execution_timezone="UTC",
        job=job,
        default_status=_schedule_status(settings),
        description=(
            "At :05 each hour, re-checks the hour that just closed and the one before it against "
            "bronze.ingest_log and ingests any hour never ingested or whose files changed (late uploads)."
        ),
    )
    def hourly_ingest(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        from logistics_platform.lib.operate.progress import read_ingest_log

        hours = hours_to_reconcile(context.scheduled_execution_time)
        scan = scan_landing(settings.landing_dir, lookback_days=None, hours=hours)
        ingested = read_ingest_log(settings, hours)
        requests = []
        tick = context.scheduled_execution_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")
        for hour in hours:
            topics = scan.get(hour, {})
            logged = {t: e.fingerprint for (t, h), e in ingested.items() if h == hour}
            in_flight = context.instance.get_runs(
                dg.RunsFilter(job_name=INGEST_JOB, statuses=ACTIVE_RUN_STATUSES, tags={"dagster/partition": hour}),
                limit=1,
            )
            if topics and stale_topics(topics, logged) and _valid_hours(settings, {hour: ""}) and not in_flight:
                fp = combine_fingerprints(topics)
                requests.append(
                    dg.RunRequest(
                        # Per tick: a stale hour whose run failed is requested again by the next tick.
                        run_key=f"hourly_ingest:{tick}:{ingest_run_key(hour, fp)}",
                        partition_key=hour,
                        tags={TRIGGER_TAG: "hourly_ingest"},
                    )
                )
        return requests or dg.SkipReason(f"hours {', '.join(hours)}: ingested and unchanged, or nothing landed")

    return hourly_ingest


# ---------------------------------------------------------------- dbt after ingest


def pending_transform_hours(instance: dg.DagsterInstance, transform_keys: Sequence[dg.AssetKey]) -> dict[str, int]:
    """Hour -> ingest storage id, for hours ingested after the last build of any of their dbt models."""
    storage = instance.event_log_storage
    ingested = storage.get_latest_storage_id_by_partition(INGEST_LOG_KEY, dg.DagsterEventType.ASSET_MATERIALIZATION)
    if not ingested:
        return {}
    built: dict[str, int] | None = None
    for key in transform_keys:
        latest = storage.get_latest_storage_id_by_partition(key, dg.DagsterEventType.ASSET_MATERIALIZATION)
        # An hour counts as built when every model was built after its ingest: take the oldest build.
        built = dict(latest) if built is None else {h: min(built.get(h, 0), latest.get(h, 0)) for h in ingested}
    built = built or {}
    return {h: sid for h, sid in ingested.items() if built.get(h, 0) < sid}


def build_transform_sensor(settings: Settings, job: UnresolvedAssetJobDefinition) -> dg.SensorDefinition:
    @dg.sensor(
        name="transform_after_ingest",
        job=job,
        # dbt's start-up dominates a small run: batching ingested hours for a few minutes saves most of it.
        minimum_interval_seconds=300,
        default_status=_sensor_status(settings),
        description=(
            "Launches one dbt run over the range of arrival hours ingested since their models were last built "
            "(waits while a dbt run is in flight). A failed dbt run is retried by the next tick's range."
        ),
    )
    def transform_after_ingest(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        active = context.instance.get_runs(dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=ACTIVE_RUN_STATUSES), limit=1)
        if active:
            return dg.SkipReason(f"dbt run {active[0].run_id} is in flight; next tick takes what it leaves")
        backfills = context.instance.get_backfills(
            filters=BulkActionsFilter(statuses=[BulkActionStatus.REQUESTED]), limit=1
        )
        if backfills:
            return dg.SkipReason(f"backfill {backfills[0].backfill_id} in progress: it builds its own dbt range")
        keys = _transform_keys(context)
        if not keys:
            return dg.SkipReason("no partitioned dbt models in this code location")
        pending = pending_transform_hours(context.instance, keys)
        if not pending:
            return dg.SkipReason("every ingested hour is built into the marts")
        lo, hi = min(pending), max(pending)
        batch = f"{lo}..{hi}:{max(pending.values())}"
        # The same pending batch is retried by later ticks (a run key alone would block it forever), up to a
        # limit so that a broken model does not relaunch every 5 minutes; each failure has raised an alert.
        failures = context.instance.get_runs_count(
            dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=[dg.DagsterRunStatus.FAILURE], tags={BATCH_TAG: batch})
        )
        if failures >= TRANSFORM_ATTEMPTS:
            return dg.SkipReason(
                f"dbt failed {failures} times for arrival hours {lo} .. {hi}: fix the cause (see the alerts), "
                "then re-run those partitions of transform_arrival_hours; new ingests also start a new batch"
            )
        return dg.RunRequest(
            run_key=f"transform:{batch}:attempt-{failures}",
            tags={
                "dagster/asset_partition_range_start": lo,
                "dagster/asset_partition_range_end": hi,
                TRIGGER_TAG: "transform_after_ingest",
                BATCH_TAG: batch,
                "logistics/pending_hours": str(len(pending)),
            },
        )

    return transform_after_ingest


def _transform_keys(context: dg.SensorEvaluationContext) -> list[dg.AssetKey]:
    graph = context.repository_def.asset_graph  # type: ignore[union-attr]
    return sorted(
        key
        for key in graph.materializable_asset_keys
        if graph.get(key).group_name in TRANSFORM_GROUPS and graph.get(key).partitions_def is not None
    )


# ---------------------------------------------------------------- freshness


def build_freshness(settings: Settings) -> tuple[list[dg.AssetChecksDefinition], dg.SensorDefinition]:
    # Checks rather than FreshnessPolicy: a check evaluation is a visible pass/fail in the UI that the
    # alert sensor turns into an alert, and the sensor decides when it is evaluated.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        return _build_freshness(settings)


def _build_freshness(settings: Settings) -> tuple[list[dg.AssetChecksDefinition], dg.SensorDefinition]:
    bronze = dg.build_last_update_freshness_checks(
        assets=[dg.AssetKey(["bronze", t]) for t in BRONZE_DATA_TABLES],
        lower_bound_delta=timedelta(hours=settings.bronze_freshness_hours),
    )
    marts = dg.build_last_update_freshness_checks(
        assets=[dg.AssetKey(["marts", m]) for m in MARTS],
        lower_bound_delta=timedelta(hours=settings.marts_freshness_hours),
    )
    checks = [*bronze, *marts]
    sensor = dg.build_sensor_for_freshness_checks(
        freshness_checks=checks,
        minimum_interval_seconds=600,
        name="freshness_checks_sensor",
        default_status=_sensor_status(settings),
    )
    return checks, sensor


# ---------------------------------------------------------------- alerts


def _run_partition(run: dg.DagsterRun) -> str | None:
    tags = run.tags
    if "dagster/partition" in tags:
        return tags["dagster/partition"]
    lo, hi = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
    return f"{lo}..{hi}" if lo and hi else None


def _root_cause(error: Any) -> str:
    """The innermost error: Dagster wraps user errors in "Error occurred while executing op ..."."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    return error.message.strip()


def run_failure_alert(context: dg.RunFailureSensorContext) -> alerts.Alert:
    run = context.dagster_run
    step_errors = []
    for event in context.get_step_failure_events():
        error = getattr(event.event_specific_data, "error", None)
        message = _root_cause(error) if error is not None else (event.message or "")
        step_errors.append(f"{event.step_key}: {message}")
    assets = _unmaterialized_assets(context.instance, run) or tuple(
        sorted(k.to_user_string() for k in (run.asset_selection or ()))
    )
    retry = run.tags.get("dagster/retry_number")
    summary = f"{run.job_name} failed" + (f" (retry {retry})" if retry else "")
    return alerts.Alert(
        kind=alerts.KIND_RUN_FAILURE,
        summary=summary,
        error="\n".join(step_errors) or (context.failure_event.message or "run failed"),
        run_id=run.run_id,
        job_name=run.job_name,
        assets=assets,
        partition=_run_partition(run),
    )


def _unmaterialized_assets(instance: dg.DagsterInstance, run: dg.DagsterRun) -> tuple[str, ...]:
    """Assets the run planned but did not materialize: the ones its failure left behind."""
    planned: set[str] = set()
    done: set[str] = set()
    for entry in instance.all_logs(
        run.run_id,
        of_type={dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, dg.DagsterEventType.ASSET_MATERIALIZATION},
    ):
        event = entry.dagster_event
        if event is None or event.asset_key is None:
            continue
        target = planned if event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED else done
        target.add(event.asset_key.to_user_string())
    return tuple(sorted(planned - done))


def build_alert_sensors(settings: Settings) -> list[dg.SensorDefinition]:
    @dg.run_failure_sensor(
        name="alert_on_run_failure",
        default_status=_sensor_status(settings),
        minimum_interval_seconds=30,
        description="Posts every failed run (run, asset, partition, error) to ALERT_WEBHOOK_URL and ALERTS_LOG.",
    )
    def alert_on_run_failure(context: dg.RunFailureSensorContext) -> None:
        result = alerts.deliver(run_failure_alert(context), settings.alerts_log, settings.alert_webhook_url)
        context.log.info(f"alert for run {context.dagster_run.run_id}: logged={result.logged} posted={result.posted}")

    @dg.sensor(
        name="alert_on_check_failure",
        default_status=_sensor_status(settings),
        minimum_interval_seconds=30,
        description=(
            "Posts failed blocking or ERROR checks and failed freshness checks to ALERT_WEBHOOK_URL and "
            "ALERTS_LOG. Cursor: the last check evaluation event seen."
        ),
    )
    def alert_on_check_failure(context: dg.SensorEvaluationContext) -> dg.SkipReason | None:
        check_keys = list(context.repository_def.asset_graph.asset_check_keys)  # type: ignore[union-attr]
        sent, cursor = deliver_check_alerts(context.instance, check_keys, context.cursor, settings)
        context.update_cursor(cursor)
        return None if sent else dg.SkipReason("no failed check to alert on")

    return [alert_on_run_failure, alert_on_check_failure]


def deliver_check_alerts(
    instance: dg.DagsterInstance, check_keys: Sequence[dg.AssetCheckKey], cursor: str | None, settings: Settings
) -> tuple[int, str]:
    """Alert on each failed alerting check evaluation newer than ``cursor``; returns (alerts sent, new cursor).

    The cursor maps check key -> id of the newest execution record seen (bounded by the number of checks).
    Reads the check-execution index, which every event-log storage keeps unsharded (SQLite shards events).
    """
    seen: dict[str, int] = json.loads(cursor) if cursor else {}
    storage = instance.event_log_storage
    latest = storage.get_latest_asset_check_execution_by_key(list(check_keys))
    sent = 0
    for key, newest in latest.items():
        name = key.to_user_string()
        last = seen.get(name)
        seen[name] = max(newest.id, last or 0)
        if last is not None and newest.id <= last:
            continue
        history = storage.get_asset_check_execution_history(key, limit=50, status={_FAILED})
        for record in sorted(history, key=lambda r: r.id):
            if last is not None and record.id <= last:
                continue
            if _alert_for_check(instance, record, settings):
                sent += 1
    return sent, json.dumps(seen, sort_keys=True, separators=(",", ":"))


def _alert_for_check(instance: dg.DagsterInstance, record: Any, settings: Settings) -> bool:
    dagster_event = record.event.dagster_event if record.event else None
    evaluation = dagster_event.event_specific_data if dagster_event else None
    if not isinstance(evaluation, dg.AssetCheckEvaluation) or evaluation.passed:
        return False
    is_freshness = "freshness" in evaluation.check_name
    if not (evaluation.blocking or evaluation.severity == dg.AssetCheckSeverity.ERROR or is_freshness):
        return False
    run = instance.get_run_by_id(record.run_id) if record.run_id else None
    alert = alerts.Alert(
        kind=alerts.KIND_FRESHNESS if is_freshness else alerts.KIND_CHECK_FAILURE,
        summary=f"{evaluation.asset_key.to_user_string()} {evaluation.check_name}",
        error=evaluation.description or f"check {evaluation.check_name} failed ({evaluation.severity.value})",
        run_id=record.run_id,
        job_name=run.job_name if run else None,
        assets=(evaluation.asset_key.to_user_string(),),
        partition=evaluation.partition or (_run_partition(run) if run else None),
        check_name=evaluation.check_name,
    )
    alerts.deliver(alert, settings.alerts_log, settings.alert_webhook_url)
    return True


# ---------------------------------------------------------------- backlog


def build_backlog(settings: Settings) -> tuple[dg.AssetsDefinition, dg.ScheduleDefinition]:
    check_spec = dg.AssetCheckSpec(
        "backlog_within_limit",
        asset=BACKLOG_KEY,
        description=(
            f"Warns when more than {BACKLOG_WARN_HOURS} landed hours wait for ingest or the marts are more than "
            f"{BACKLOG_WARN_HOURS} hours behind bronze."
        ),
    )

    @dg.asset(
        key=BACKLOG_KEY,
        group_name="operations",
        kinds={"python"},
        owners=["team:data-platform"],
        check_specs=[check_spec],
        description="Landed hours/files/lines not yet ingested and how far the marts lag behind bronze.",
    )
    def pipeline_backlog(context: AssetExecutionContext) -> Iterator[Any]:
        """Landed hours/files/lines not yet ingested and how far the marts lag behind bronze."""
        from logistics_platform.lib.operate.progress import backlog, hours_between, read_ingest_log

        scan = scan_landing(settings.landing_dir, lookback_days=None)
        state = backlog(scan, read_ingest_log(settings), settings.landing_dir)
        marts_hour = _latest_built_hour(context.instance)
        marts_lag = hours_between(marts_hour, state.latest_ingested)
        metadata: dict[str, Any] = {
            **state.as_metadata(),
            "marts_latest_hour": marts_hour or "-",
            "marts_lag_hours": marts_lag,
        }
        context.log.info(f"backlog: {metadata}")
        ok = len(state.hours_pending) <= BACKLOG_WARN_HOURS and marts_lag <= BACKLOG_WARN_HOURS
        yield dg.Output(None, metadata=metadata)
        yield dg.AssetCheckResult(
            check_name="backlog_within_limit",
            passed=ok,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"hours_pending": len(state.hours_pending), "marts_lag_hours": marts_lag},
            description=None
            if ok
            else (
                f"{len(state.hours_pending)} hours pending ingest (oldest {state.hours_pending[:1]}), marts "
                f"{marts_lag:.0f}h behind: check that landing_sensor/hourly_ingest/transform_after_ingest run, "
                "and `logistics-platform verify`"
            ),
        )

    job = dg.define_asset_job("report_backlog", selection=dg.AssetSelection.assets(BACKLOG_KEY))
    schedule = dg.ScheduleDefinition(
        name="backlog_report",
        job=job,
        cron_schedule="30 * * * *",
        execution_timezone="UTC",
        default_status=_schedule_status(settings),
        description="Hourly at :30 (after the :05 ingest): ingest backlog and marts lag (metadata + warning check).",
    )
    return pipeline_backlog, schedule


def _latest_built_hour(instance: dg.DagsterInstance) -> str | None:
    """Newest arrival hour whose marts were built (from fct_orders' partition materializations)."""
    latest = instance.event_log_storage.get_latest_storage_id_by_partition(
        dg.AssetKey(["marts", "fct_orders"]), dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    return max(latest) if latest else None


# ---------------------------------------------------------------- assembly


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""
    freshness_checks, freshness_sensor = build_freshness(settings)
    ingest_job, transform_job = build_jobs(settings, freshness_checks)
    backlog_asset, backlog_schedule = build_backlog(settings)
    return dg.Definitions(
        # One process per run, not one per step: a run here is one heavy step (ingest or dbt) plus light checks,
        # and each extra step process re-imports Dagster and the definitions (~5 s of CPU on 2 cores).
        executor=dg.in_process_executor,
        assets=[backlog_asset],
        asset_checks=freshness_checks,
        jobs=[ingest_job, transform_job],
        schedules=[build_hourly_ingest_schedule(settings, ingest_job), backlog_schedule],
        sensors=[
            build_landing_sensor(settings, ingest_job),
            build_transform_sensor(settings, transform_job),
            freshness_sensor,
            *build_alert_sensors(settings),
        ],
    )
