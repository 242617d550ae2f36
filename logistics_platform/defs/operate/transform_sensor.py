"""The dbt layer's triggers: the full batch and the live path of the SLA and off-route alerts (transform_pending)."""

import time
from datetime import UTC, datetime

import dagster as dg

from logistics_platform.defs.constants import INGEST_LOG_KEY, LIVE_CHECKS, TRANSFORM_GROUPS, TRANSFORM_JOB, TRIGGER_TAG
from logistics_platform.defs.operate.common import ACTIVE_RUN_STATUSES, NOT_YET_READING, sensor_status
from logistics_platform.lib.operate.transform_pending import BuiltState, live_batch, live_cursor
from logistics_platform.lib.transform.arrival_window import ArrivalWindow, tagged_window
from logistics_platform.settings import Settings

BATCH_TAG = "logistics/transform_batch"
TRANSFORM_ATTEMPTS = 3  # runs of one failing batch (a new run key each, each failure alerted), then it waits
LIVE_SENSOR = "sla_after_ingest"
# The run tag that marks a live run (the UI's filter, and what the backlog leaves out: it builds two marts).
LIVE_TAG = "logistics/live"


def ingested_hours(instance: dg.DagsterInstance) -> dict[str, int]:
    """Hour -> storage id of its latest ``bronze/ingest_log`` materialization (its latest ingest)."""
    event = dg.DagsterEventType.ASSET_MATERIALIZATION
    return dict(instance.event_log_storage.get_latest_storage_id_by_partition(INGEST_LOG_KEY, event))


def pending_transform_hours(
    instance: dg.DagsterInstance, cursor: str | None, within_days: float | None = None
) -> tuple[dict[str, int], str]:
    """Hour -> latest ingest id of the hours no successful transform run built since; the next cursor. ``within_days``
    (no cursor): of the hours last ingested in those days, from the runs since the oldest of those ingests only."""
    state = BuiltState.load(cursor) or BuiltState()  # no cursor: rebuilt from every successful run
    floor = 0  # the oldest ingest (storage id) looked at; a run that built an ingest finished after it
    if within_days is not None:
        recent = dg.AssetRecordsFilter(INGEST_LOG_KEY, after_timestamp=time.time() - within_days * 86_400)
        if not (records := instance.fetch_materializations(recent, limit=1, ascending=True).records):
            return {}, state.dump()  # nothing ingested in those days: no hour waits (not "every hour")
        floor, state.seen_until = records[0].storage_id, records[0].timestamp
    after = state.fold_after()
    since = datetime.fromtimestamp(after, UTC) if after is not None else None
    done = dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=[dg.DagsterRunStatus.SUCCESS], updated_after=since)
    for record in instance.get_run_records(done):
        state.fold_run(record.dagster_run.tags, record.update_timestamp.timestamp())
    ingested = {hour: sid for hour, sid in ingested_hours(instance).items() if sid >= floor}
    return state.pending(ingested), state.prune(ingested).dump()


def build_dbt_triggers(settings: Settings) -> dg.Definitions:
    """transform_after_ingest and sla_after_ingest; why they are sensors: docs/internals/operate.md."""

    @dg.sensor(
        name="transform_after_ingest",
        job_name=TRANSFORM_JOB,
        minimum_interval_seconds=180,  # few whole-layer dbt runs holding the DuckDB writer; the SLA mart goes live
        default_status=sensor_status(settings),
        description=(
            "One dbt run over the arrival hours ingested since a successful run built them (window tags "
            "logistics/arrival_hours_start/_end, partitions their days); waits while a dbt run is in flight. Cursor: "
            "per recent hour, the newest ingest a successful run built."
        ),
    )
    def transform_after_ingest(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        graph, instance = context.repository_def.asset_graph, context.instance  # type: ignore[union-attr]
        if not any(graph.get(k).partitions_def for k in dg.AssetSelection.groups(*TRANSFORM_GROUPS).resolve(graph)):
            return dg.SkipReason("no partitioned dbt models in this code location")
        pending, cursor = pending_transform_hours(instance, context.cursor)
        context.update_cursor(cursor)  # on every tick, in flight or not: it folds in the runs that finished
        if active := instance.get_runs(dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=ACTIVE_RUN_STATUSES), limit=1):
            return dg.SkipReason(f"dbt run {active[0].run_id} is in flight; next tick takes what it leaves")
        # By the status's name: the status filter of `get_backfills` takes types that `dagster` does not export.
        if backfill := next((b for b in instance.get_backfills(limit=20) if b.status.value == "REQUESTED"), None):
            return dg.SkipReason(f"backfill {backfill.backfill_id} in progress: it builds its own dbt range")
        if not pending:
            return dg.SkipReason("every ingested hour is built into the marts")
        window = ArrivalWindow.of_hours(min(pending), max(pending))
        batch = f"{window.first_key}..{window.last_key}:{max(pending.values())}"
        failed = dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=[dg.DagsterRunStatus.FAILURE], tags={BATCH_TAG: batch})
        if (failures := instance.get_runs_count(failed)) >= TRANSFORM_ATTEMPTS:
            return dg.SkipReason(
                f"dbt failed {failures} times for arrival hours {window.label}: fix the cause (see the alerts), then "
                f"re-run the days {window.first:%Y-%m-%d}..{window.last:%Y-%m-%d} of transform_arrival_hours; new "
                "ingests also start a new batch"
            )
        tags = {TRIGGER_TAG: "transform_after_ingest", BATCH_TAG: batch, "logistics/pending_hours": str(len(pending))}
        return dg.RunRequest(run_key=f"transform:{batch}:attempt-{failures}", tags={**window.run_tags(), **tags})

    @dg.sensor(
        name=LIVE_SENSOR,
        job_name=TRANSFORM_JOB,
        minimum_interval_seconds=5,  # the daemon's floor; a tick reads one index of the event log
        default_status=sensor_status(settings),
        description=(
            "Live path: for the hour in progress (or the one before) just ingested, a transform run of only "
            "marts/fct_region_sla and marts/fct_courier_off_route, the models they read and their checks "
            "sla_within_target and couriers_on_route (they post a breach or a new off-route episode to "
            "ALERT_WEBHOOK_URL). Cursor: the newest bronze/ingest_log materialization seen."
        ),
    )
    def sla_after_ingest(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        graph = context.repository_def.asset_graph  # type: ignore[union-attr]
        if not (marts := [c.asset_key for c in LIVE_CHECKS if graph.has(c.asset_key)]):
            return dg.SkipReason(f"no {LIVE_CHECKS[0].asset_key.to_user_string()} in this code location")
        batch, cursor = live_batch(ingested_hours(context.instance), live_cursor(context.cursor), datetime.now(UTC))
        context.update_cursor(str(cursor))
        if batch is None:
            return dg.SkipReason("no live hour ingested since the last tick")
        window = ArrivalWindow.of_hours(batch.hours[0], batch.hours[-1])
        live = dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=NOT_YET_READING, tags={LIVE_TAG: "sla"})
        for run in context.instance.get_runs(live, limit=5):
            if (covers := tagged_window(run.tags)) and covers.first <= window.first and window.last <= covers.last:
                # That run has not read bronze yet: it builds this ingest too, one dbt run instead of a queue of them.
                return dg.SkipReason(f"a live run not started yet covers {window.label}")
        models = dg.AssetSelection.assets(*marts).upstream() & dg.AssetSelection.groups(*TRANSFORM_GROUPS)
        return dg.RunRequest(
            run_key=batch.run_key,
            asset_selection=sorted(models.resolve(graph)),
            # Only the alerting checks: the dbt tests of these models run with the full batch (they would double it).
            asset_check_keys=[c for c in LIVE_CHECKS if c.asset_key in marts],
            tags={**window.run_tags(), TRIGGER_TAG: LIVE_SENSOR, LIVE_TAG: "sla"},
        )

    return dg.Definitions(sensors=[transform_after_ingest, sla_after_ingest])
