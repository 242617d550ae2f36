"""Trigger of the transform job: one dbt run over the arrival hours ingested since a successful run last built them.

Which hours wait is :mod:`logistics_platform.lib.operate.transform_pending`'s bookkeeping, kept in the sensor's
cursor and fed from Dagster's own records: the latest ingest of each hour (the ``bronze/ingest_log``
materializations, hourly) and the successful transform runs (the window and ingest watermark they are tagged with).
"""

from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg

from logistics_platform.defs.constants import INGEST_LOG_KEY, TRANSFORM_GROUPS, TRANSFORM_JOB, TRIGGER_TAG
from logistics_platform.defs.operate.common import ACTIVE_RUN_STATUSES, sensor_status
from logistics_platform.lib.operate.transform_pending import (
    WATERMARK_TAG,
    BuiltState,
    dump_state,
    load_state,
    pending_hours,
    prune,
)
from logistics_platform.lib.transform.arrival_window import ArrivalWindow, run_window
from logistics_platform.settings import Settings

BATCH_TAG = "logistics/transform_batch"
TRANSFORM_ATTEMPTS = 3
# A backfill in progress is among the newest few (a backfill is requested, then runs until it ends).
BACKFILLS_LOOKED_AT = 20


def ingested_hours(instance: dg.DagsterInstance) -> dict[str, int]:
    """Hour -> storage id of its latest ``bronze/ingest_log`` materialization (its latest ingest)."""
    storage = instance.event_log_storage
    return dict(storage.get_latest_storage_id_by_partition(INGEST_LOG_KEY, dg.DagsterEventType.ASSET_MATERIALIZATION))


def built_runs(instance: dg.DagsterInstance, after: float | None) -> Iterator[tuple[ArrivalWindow | None, int, float]]:
    """(window, ingest watermark, update time) of each successful transform run updated after ``after``.

    A run without a watermark (it failed before its dbt step, or built a subset of the models) has window None.
    """
    since = datetime.fromtimestamp(after, UTC) if after is not None else None
    filters = dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=[dg.DagsterRunStatus.SUCCESS], updated_after=since)
    for record in instance.get_run_records(filters):
        tags = record.dagster_run.tags
        updated = record.update_timestamp.timestamp()
        watermark = tags.get(WATERMARK_TAG)
        yield (run_window(tags), int(watermark), updated) if watermark else (None, 0, updated)


def pending_transform_hours(instance: dg.DagsterInstance, cursor: str | None) -> tuple[dict[str, int], str]:
    """Hour -> latest ingest id of the hours no successful transform run built since that ingest; the next cursor.

    Without a cursor (a new sensor, or one reset) the state is rebuilt from every successful transform run.
    """
    state = load_state(cursor) or BuiltState()
    for window, watermark, updated in built_runs(instance, state.fold_after()):
        state.fold(window.hour_keys() if window else (), watermark, updated)
    ingested = ingested_hours(instance)
    return pending_hours(ingested, state), dump_state(prune(state, ingested))


def requested_backfill(instance: dg.DagsterInstance) -> str | None:
    """Id of a backfill still in progress among the newest ones, or None."""
    # By the status's name: the status filter of `get_backfills` takes types that `dagster` does not export.
    for backfill in instance.get_backfills(limit=BACKFILLS_LOOKED_AT):
        if backfill.status.value == "REQUESTED":
            return backfill.backfill_id
    return None


def _has_transform_assets(context: dg.SensorEvaluationContext) -> bool:
    graph = context.repository_def.asset_graph  # type: ignore[union-attr]
    return any(
        graph.get(key).group_name in TRANSFORM_GROUPS and graph.get(key).partitions_def is not None
        for key in graph.materializable_asset_keys
    )


def build_transform_sensor(settings: Settings) -> dg.SensorDefinition:
    """Launches the transform job over the window of hours ingested since a successful run last built them."""

    @dg.sensor(
        name="transform_after_ingest",
        job_name=TRANSFORM_JOB,
        # Every tick takes all hours ingested since they were last built as one window, and waits while a dbt run is
        # in flight. The SLA monitor no longer waits for it (the live path, sla_after_ingest, builds the SLA mart
        # within a minute of a landed file), so the full batch runs every few minutes: fewer whole-layer dbt runs
        # holding the DuckDB writer while live SLA runs queue behind them, on 2 cores.
        minimum_interval_seconds=180,
        default_status=sensor_status(settings),
        description=(
            "Launches one dbt run over the window of arrival hours ingested since a successful dbt run last built "
            "them (tagged logistics/arrival_hours_start/_end; the run's partitions are the days of those hours). "
            "Waits while a dbt run is in flight; an hour ingested meanwhile, or left by a failed run, goes to the "
            "next run. Cursor: per recent hour, the newest ingest a successful run built."
        ),
    )
    def transform_after_ingest(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        if not _has_transform_assets(context):
            return dg.SkipReason("no partitioned dbt models in this code location")
        # The bookkeeping first, on every tick: it folds in the runs that finished, in flight or not.
        pending, cursor = pending_transform_hours(context.instance, context.cursor)
        context.update_cursor(cursor)
        active = context.instance.get_runs(dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=ACTIVE_RUN_STATUSES), limit=1)
        if active:
            return dg.SkipReason(f"dbt run {active[0].run_id} is in flight; next tick takes what it leaves")
        backfill = requested_backfill(context.instance)
        if backfill:
            return dg.SkipReason(f"backfill {backfill} in progress: it builds its own dbt range")
        if not pending:
            return dg.SkipReason("every ingested hour is built into the marts")
        window = ArrivalWindow.of_hours(min(pending), max(pending))
        batch = f"{window.first_key}..{window.last_key}:{max(pending.values())}"
        # The same pending batch is retried by later ticks (a run key alone would block it forever), up to a
        # limit so that a broken model does not relaunch on every tick; each failure has raised an alert.
        failures = context.instance.get_runs_count(
            dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=[dg.DagsterRunStatus.FAILURE], tags={BATCH_TAG: batch})
        )
        if failures >= TRANSFORM_ATTEMPTS:
            first_day, last_day = window.day_keys()
            return dg.SkipReason(
                f"dbt failed {failures} times for arrival hours {window.label}: fix the cause (see the alerts), then "
                f"re-run the days {first_day}..{last_day} of transform_arrival_hours; new ingests also start a new "
                "batch"
            )
        return dg.RunRequest(
            run_key=f"transform:{batch}:attempt-{failures}",
            tags={
                **window.run_tags(),
                TRIGGER_TAG: "transform_after_ingest",
                BATCH_TAG: batch,
                "logistics/pending_hours": str(len(pending)),
            },
        )

    return transform_after_ingest
