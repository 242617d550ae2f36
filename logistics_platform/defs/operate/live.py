"""The live SLA path: a sensor that launches, for the hours just ingested, a transform run of only the models the SLA
mart needs and its SLA check, which posts its alert itself (``defs/transform``).

What it decides is :mod:`logistics_platform.lib.operate.live_batch`. The run is a subset of the transform job, so it
carries no ingest watermark and the transform sensor still builds every model of those hours in its next batch.
"""

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from logistics_platform.defs.constants import TRANSFORM_GROUPS, TRANSFORM_JOB, TRIGGER_TAG
from logistics_platform.defs.operate.common import sensor_status
from logistics_platform.defs.operate.transform_sensor import ingested_hours
from logistics_platform.lib.operate.live_batch import live_batch, load_cursor
from logistics_platform.lib.transform.arrival_window import ArrivalWindow, tagged_window
from logistics_platform.lib.transform.operations import SLA_CHECK, SLA_MART
from logistics_platform.settings import Settings

SLA_KEY = dg.AssetKey(["marts", SLA_MART])
SLA_CHECK_KEY = dg.AssetCheckKey(SLA_KEY, SLA_CHECK)
# A run in these states has not started its dbt step, so it reads every ingest committed so far.
NOT_YET_READING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]
LIVE_SENSOR = "sla_after_ingest"
# The run tag that marks a live SLA run (the UI's filter, and what the backlog leaves out: it builds one mart).
LIVE_TAG = "logistics/live"
# The sensor daemon wakes every 5 s at best; a tick reads one index of the event log (the latest ingest per hour).
LIVE_INTERVAL_SECONDS = 5


def sla_assets(graph: Any) -> list[dg.AssetKey]:
    """The dbt models the SLA mart is built from, itself included (``graph``: the repository's asset graph, whose type
    ``dagster`` does not export)."""
    return sorted(
        key
        for key in graph.get_ancestor_asset_keys(SLA_KEY) | {SLA_KEY}
        if key in graph.materializable_asset_keys and graph.get(key).group_name in TRANSFORM_GROUPS
    )


def _covers(tags: Mapping[str, str], window: ArrivalWindow) -> bool:
    run = tagged_window(tags)
    return run is not None and run.first <= window.first and window.last <= run.last


def build_live_sensor(settings: Settings) -> dg.SensorDefinition:
    """Launches an SLA-only transform run over the live hours ingested since its last tick."""

    @dg.sensor(
        name=LIVE_SENSOR,
        job_name=TRANSFORM_JOB,
        minimum_interval_seconds=LIVE_INTERVAL_SECONDS,
        default_status=sensor_status(settings),
        description=(
            "Live SLA path: when the hour in progress (or the one before) is ingested, launches a transform run of "
            "only marts/fct_region_sla and the models it reads, with their checks, over those hours; its "
            "sla_within_target check posts a breach to ALERT_WEBHOOK_URL. The other marts follow with "
            "transform_after_ingest. Cursor: the newest bronze/ingest_log materialization seen."
        ),
    )
    def sla_after_ingest(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        graph = context.repository_def.asset_graph  # type: ignore[union-attr]
        if not graph.has(SLA_KEY):
            return dg.SkipReason(f"no {SLA_KEY.to_user_string()} in this code location")
        batch, cursor = live_batch(ingested_hours(context.instance), load_cursor(context.cursor), datetime.now(UTC))
        if batch is None:
            context.update_cursor(str(cursor))
            return dg.SkipReason("no live hour ingested since the last tick")
        window = ArrivalWindow.of_hours(batch.hours[0], batch.hours[-1])
        waiting = context.instance.get_runs(
            dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=NOT_YET_READING, tags={LIVE_TAG: "sla"}), limit=5
        )
        if any(_covers(run.tags, window) for run in waiting):
            # That run has not read bronze yet: it builds this ingest too, one dbt run instead of a queue of them.
            context.update_cursor(str(cursor))
            return dg.SkipReason(f"a live SLA run not started yet covers {window.label}")
        request = dg.RunRequest(
            run_key=batch.run_key,
            asset_selection=sla_assets(graph),
            # Only the SLA check: the dbt tests of these models run with the full batch (they would double the run).
            asset_check_keys=[SLA_CHECK_KEY],
            tags={**window.run_tags(), TRIGGER_TAG: LIVE_SENSOR, LIVE_TAG: "sla"},
        )
        return dg.SensorResult(run_requests=[request], cursor=str(cursor))

    return sla_after_ingest
