"""Trigger of the transform job: one dbt run over the arrival hours ingested since their models were built."""

from collections.abc import Sequence

import dagster as dg

# No public way: `DagsterInstance.get_backfills` takes its status filter only as these types, and `dagster` exports
# neither (nor another query for backfills in progress). Named in tests/test_architecture.py's allow-list.
from dagster._core.execution.backfill import BulkActionsFilter, BulkActionStatus

from logistics_platform.defs.constants import INGEST_LOG_KEY, TRANSFORM_GROUPS, TRANSFORM_JOB, TRIGGER_TAG
from logistics_platform.defs.operate.common import ACTIVE_RUN_STATUSES, sensor_status
from logistics_platform.lib.operate.landing_watch import RANGE_END_TAG, RANGE_START_TAG
from logistics_platform.settings import Settings

BATCH_TAG = "logistics/transform_batch"
TRANSFORM_ATTEMPTS = 3


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


def _transform_keys(context: dg.SensorEvaluationContext) -> list[dg.AssetKey]:
    graph = context.repository_def.asset_graph  # type: ignore[union-attr]
    return sorted(
        key
        for key in graph.materializable_asset_keys
        if graph.get(key).group_name in TRANSFORM_GROUPS and graph.get(key).partitions_def is not None
    )


def build_transform_sensor(settings: Settings) -> dg.SensorDefinition:
    """Launches the transform job over the range of hours ingested since their models were last built."""

    @dg.sensor(
        name="transform_after_ingest",
        job_name=TRANSFORM_JOB,
        # Every tick takes all hours ingested since the last build as one range, and waits while a dbt run is in
        # flight, so a short interval costs no extra dbt runs when hours pile up; it is what keeps the operations
        # checks (a 5-minute SLA monitor) reacting within minutes of a landed file rather than at the next batch.
        minimum_interval_seconds=60,
        default_status=sensor_status(settings),
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
        # limit so that a broken model does not relaunch on every tick; each failure has raised an alert.
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
                RANGE_START_TAG: lo,
                RANGE_END_TAG: hi,
                TRIGGER_TAG: "transform_after_ingest",
                BATCH_TAG: batch,
                "logistics/pending_hours": str(len(pending)),
            },
        )

    return transform_after_ingest
