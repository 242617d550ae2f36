"""The live SLA path: a sensor that launches, for the hours just ingested, a transform run of only the models the SLA
mart needs, with their checks; the SLA check in that run posts its alert itself (``defs/transform``).

What it decides is :mod:`logistics_platform.lib.operate.live_batch`. The run is a subset of the transform job, so it
carries no ingest watermark and the transform sensor still builds every model of those hours in its next batch.
"""

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from logistics_platform.defs.constants import HEALTH_CHECK, TRANSFORM_GROUPS, TRANSFORM_JOB, TRIGGER_TAG
from logistics_platform.defs.operate.common import sensor_status
from logistics_platform.defs.operate.transform_sensor import ingested_hours
from logistics_platform.lib.operate.live_batch import live_batch, load_cursor
from logistics_platform.lib.transform.arrival_window import ArrivalWindow
from logistics_platform.lib.transform.operations import SLA_MART
from logistics_platform.lib.transform.project import dbt_project
from logistics_platform.settings import Settings

SLA_KEY = dg.AssetKey(["marts", SLA_MART])
LIVE_SENSOR = "sla_after_ingest"
# The run tag that marks a live SLA run (the UI's filter, and what the backlog leaves out: it builds one mart).
LIVE_TAG = "logistics/live"
# The sensor daemon wakes every 5 s at best; a tick reads one index of the event log (the latest ingest per hour).
LIVE_INTERVAL_SECONDS = 5


def foreign_tests(manifest: Mapping[str, Any], models: Collection[str]) -> set[str]:
    """Names of the dbt tests that read a model outside ``models`` (e.g. a relationship to a dimension the live run
    does not build: it would compare fresh rows with a stale table)."""
    names = set()
    for node in manifest.get("nodes", {}).values():
        if node.get("resource_type") != "test":
            continue
        read = {dep.split(".")[-1] for dep in node.get("depends_on", {}).get("nodes", []) if dep.startswith("model.")}
        if read - set(models):
            names.add(node["name"])
    return names


def sla_selection(
    graph: Any, skipped_checks: Sequence[dg.AssetCheckKey], manifest: Mapping[str, Any]
) -> tuple[list[dg.AssetKey], list[dg.AssetCheckKey]]:
    """The dbt models the SLA mart is built from (itself included), and their checks that the transform job runs and
    that read only those models.

    ``graph`` is the repository's asset graph (its type is not exported by ``dagster``).
    """
    assets = [
        key
        for key in graph.get_ancestor_asset_keys(SLA_KEY) | {SLA_KEY}
        if key in graph.materializable_asset_keys and graph.get(key).group_name in TRANSFORM_GROUPS
    ]
    skipped = set(skipped_checks)
    foreign = foreign_tests(manifest, [key.path[-1] for key in assets])
    checks = [
        key
        for key in graph.asset_check_keys
        if key.asset_key in assets and key not in skipped and key.name != HEALTH_CHECK and key.name not in foreign
    ]
    return sorted(assets), sorted(checks)


def build_live_sensor(settings: Settings, skipped_checks: Sequence[dg.AssetCheckKey] = ()) -> dg.SensorDefinition:
    """Launches an SLA-only transform run over the live hours ingested since its last tick."""
    manifest = json.loads(dbt_project(settings).manifest_path.read_text())

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
        assets, checks = sla_selection(graph, skipped_checks, manifest)
        window = ArrivalWindow.of_hours(batch.hours[0], batch.hours[-1])
        request = dg.RunRequest(
            run_key=batch.run_key,
            asset_selection=assets,
            asset_check_keys=checks,
            tags={**window.run_tags(), TRIGGER_TAG: LIVE_SENSOR, LIVE_TAG: "sla"},
        )
        return dg.SensorResult(run_requests=[request], cursor=str(cursor))

    return sla_after_ingest
