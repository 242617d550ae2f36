"""The dbt project as Dagster assets, run through dagster-dbt's ``DbtCliResource``.

Partitioning: every dbt asset is partitioned by arrival DAY (UTC, today included), while bronze is partitioned by
arrival hour; day D of a model depends on the hours of D in bronze (a time-window mapping). A run builds one window
of arrival hours inside its days, as ONE ``dbt build`` (single-run backfill policy): the hours its launcher asked for
(run tags, see :mod:`logistics_platform.lib.transform.arrival_window`; the transform sensor asks for the hours
ingested since they were last built), or every hour of its days (a UI materialization or backfill of days). Every
model is idempotent per window, so re-running any window is safe and any order of windows gives the tables a full
refresh gives. Dagster records one materialization per model and DAY of the run, whatever the number of hours.

Before dbt runs, the window plan (:mod:`logistics_platform.lib.transform.window_plan`) leaves out the models the
window cannot change; it is a dbt selection (``--exclude``), which dagster-dbt merges with the run's own subset.
The run is tagged with its window and its ingest watermark (:mod:`logistics_platform.lib.operate.transform_pending`),
which tell the transform sensor which ingested hours it built.
"""

# No `from __future__ import annotations`: Dagster reads the asset function annotations at runtime.

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslatorSettings, DbtCliResource, dbt_assets, get_asset_key_for_model

from logistics_platform.defs.constants import DUCKDB_POOL, INGEST_LOG_KEY, OWNERS
from logistics_platform.defs.constants import DUCKDB_WRITER_TAGS as WRITER_TAGS
from logistics_platform.defs.partitions import arrival_day_partitions
from logistics_platform.defs.preflight import require_usable_lakehouse
from logistics_platform.defs.transform.translator import LogisticsDbtTranslator
from logistics_platform.lib.operate.transform_pending import WATERMARK_TAG
from logistics_platform.lib.transform.arrival_window import ArrivalWindow, window_within_days
from logistics_platform.lib.transform.project import (
    dbt_invocation_environment,
    dbt_project,
    keep_partial_parse,
    window_vars,
)
from logistics_platform.lib.transform.spark import is_spark
from logistics_platform.lib.transform.window_plan import WindowPlan, plan_window, record_static_builds, window_sets_for
from logistics_platform.settings import Settings

DBT_ASSETS_NAME = "dbt_models"

FOLDED_WINDOWS_SPEC = dg.AssetSpec(
    key=dg.AssetKey(["ops", "folded_windows"]),
    group_name="operations",
    description=(
        "DuckDB table ops.folded_windows: event-time windows whose late events an operator folded back into the "
        "windowed marts (`logistics-platform late fold`)."
    ),
    kinds={"duckdb"},
    owners=OWNERS,
)


class DbtBuildConfig(dg.Config):
    """Run options of the dbt assets."""

    full_refresh: bool = False


def ingest_watermark(instance: dg.DagsterInstance) -> int:
    """Storage id of the newest ``bronze/ingest_log`` materialization (0 before any ingest)."""
    records = instance.fetch_materializations(INGEST_LOG_KEY, limit=1).records
    return records[0].storage_id if records else 0


def arrival_window(context: dg.AssetExecutionContext) -> ArrivalWindow:
    """The arrival hours this run builds: the hours its tags name, else every hour of its day partitions."""
    days = context.partition_time_window
    try:
        return window_within_days(context.run.tags, days.start, days.end)
    except ValueError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None


def window_plan(
    context: dg.AssetExecutionContext, settings: Settings, manifest: Mapping[str, Any], window: ArrivalWindow
) -> WindowPlan | None:
    """The models these arrival hours leave unchanged; None (run everything) if bronze or DuckDB cannot be probed."""
    try:
        plan = plan_window(settings, manifest, window.first, window.last)
    except Exception as exc:  # the probe only saves time: a run without it is correct, just slower
        context.log.warning(f"Could not probe the window, running every model: {exc}")
        return None
    windowless = [name for name in plan.idle if name not in plan.unchanged]
    if windowless:
        context.log.info(
            f"Skipping {', '.join(windowless)}: no bronze rows for their sources in these arrival hours "
            f"(bronze tables with rows: {', '.join(sorted(plan.active_sources)) or 'none'})"
        )
    if plan.unchanged:
        context.log.info(f"Skipping {', '.join(plan.unchanged)}: seeds and views unchanged since their last build")
    return plan


# dbt's unit tests check model logic on fixed inputs, not the data: they belong to CI (`dbt build` and `dbt test`
# there run them, as tests/transform does), not to every hourly run.
UNIT_TESTS_OFF = ("--exclude-resource-type", "unit_test")


@dataclass(frozen=True)
class DbtStep:
    """What one run of the dbt assets asks dbt for, decided before dbt starts."""

    args: list[str]
    window: dict[str, str]  # dbt vars of the arrival window, passed as environment variables
    metadata: dict[str, Any]  # added to every materialization of the run (the window and the ingest watermark)
    no_ops: list[dg.Output]  # the selected models the window leaves unchanged, reported as built
    unreported: frozenset[str]  # outputs dbt builds that the run did not select (affected sets)


def plan_step(
    context: dg.AssetExecutionContext,
    settings: Settings,
    manifest: Mapping[str, Any],
    every_model: frozenset[dg.AssetKey],
    full_refresh: bool,
) -> DbtStep:
    """The run's window (tagged on the run), the models it skips, and the dbt arguments that build the rest."""
    # Read before dbt reads bronze: every ingest up to this one is committed in the tables dbt is about to read.
    watermark = ingest_watermark(context.instance)
    window = arrival_window(context)
    selected = set(context.selected_asset_keys)
    # Which arrival hours the run covered, in the UI's run tags (a backfill of days names only its days), and the
    # watermark the transform sensor counts, for a run that builds every model (a subset leaves others behind).
    tags = window.window_tags() | ({WATERMARK_TAG: str(watermark)} if selected >= every_model else {})
    context.instance.add_run_tags(context.run_id, tags)
    metadata = {"arrival_hours": window.label, "ingest_watermark": watermark}
    # The window plan reads what the DuckDB file holds; on Spark every model of the run is built.
    plan = None if full_refresh or is_spark(settings) else window_plan(context, settings, manifest, window)
    args = [
        "build",
        *UNIT_TESTS_OFF,
        *(["--full-refresh"] if full_refresh else []),
        *(plan.exclude_args() if plan else []),
    ]
    # A subset picked without the affected sets its models read: dbt builds them too, for this window (a set is the
    # keys one run's window changed, so the last run's would re-apply those keys instead). Not reported as
    # materializations: they are not among the run's selected assets.
    names = {key.path[-1] for key in selected}
    unselected_sets = sorted(window_sets_for(manifest, names) - names)
    if unselected_sets:
        args += ["--select", " ".join(unselected_sets)]
    unreported = {get_asset_key_for_model([context.assets_def], m).to_python_identifier() for m in unselected_sets}
    no_ops = []
    for model in plan.idle if plan else ():
        key = get_asset_key_for_model([context.assets_def], model)
        if key in selected:
            # Processing these hours is a no-op for the model: its partitions are as up to date as the others.
            # Yielded first: an idle model's inputs are bronze and other idle models (topological order).
            reason = (
                "unchanged since its last build (file, config and SQL)"
                if plan and model in plan.unchanged
                else "no bronze rows for its sources in these arrival hours"
            )
            status: dict[str, Any] = {"status": "no-op", "reason": reason, **metadata}
            no_ops.append(dg.Output(None, output_name=key.to_python_identifier(), metadata=status))
    dbt_vars = window_vars(window.first, window.last)
    context.log.info(
        f"dbt {' '.join(args)} (arrival hours {dbt_vars['min_arrival_hour']} .. {dbt_vars['max_arrival_hour']})"
    )
    return DbtStep(args, dbt_vars, metadata, no_ops, frozenset(unreported))


def with_metadata(event: Any, metadata: Mapping[str, Any]) -> Any:
    """``event`` with ``metadata`` added when it is a materialization (dbt's test results pass unchanged)."""
    if isinstance(event, dg.Output | dg.AssetMaterialization):
        return event.with_metadata({**event.metadata, **metadata})
    return event


def record_builds(
    context: dg.AssetExecutionContext, settings: Settings, manifest: Mapping[str, Any], invocation: Any
) -> None:
    """Record the seeds and views the run built, so that the next runs skip them until they change (DuckDB only)."""
    if is_spark(settings):
        return
    try:
        results = invocation.get_artifact("run_results.json").get("results", [])
        record_static_builds(settings.duckdb_path, manifest, results)
    except Exception as exc:  # only saves later runs time: they rebuild what is not recorded
        context.log.warning(f"Could not record the seeds and views built: {exc}")


def build_dbt_assets(settings: Settings) -> dg.AssetsDefinition:
    project = dbt_project(settings)
    manifest = json.loads(project.manifest_path.read_text())
    partitions = arrival_day_partitions(settings)

    @dbt_assets(
        manifest=project.manifest_path,
        project=project,
        name=DBT_ASSETS_NAME,
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        dagster_dbt_translator=LogisticsDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=True)),
        op_tags=WRITER_TAGS,
        # DuckDB takes one writer: the pool holds every run that writes the file, backfill runs included.
        pool=DUCKDB_POOL,
        retry_policy=dg.RetryPolicy(
            max_retries=2, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
        ),
    )
    def dbt_models(
        context: dg.AssetExecutionContext,
        dbt: DbtCliResource,
        settings: dg.ResourceParam[Settings],
        config: DbtBuildConfig,
    ) -> Iterator[Any]:
        """dbt build of staging, intermediate and marts for the run's window of arrival hours (one dbt invocation)."""
        require_usable_lakehouse(settings)
        step = plan_step(context, settings, manifest, frozenset(dbt_models.keys), config.full_refresh)
        yield from step.no_ops
        with dbt_invocation_environment(settings, step.window):
            invocation = dbt.cli(step.args, context=context)
        # No fetch_column_metadata()/fetch_row_counts(): dagster-dbt runs them from this process on its own
        # connection to the DuckDB file, opened read-only, while the dbt process writes it (DuckDB: one writing
        # process per file), and every dbt-duckdb connection runs our plugin, which creates the bronze views and ops
        # tables: on that connection each query fails ("attached in read-only mode") and the metadata is dropped.
        try:
            for event in invocation.stream():
                if not (isinstance(event, dg.Output) and event.output_name in step.unreported):
                    yield with_metadata(event, step.metadata)
        finally:
            keep_partial_parse(settings, invocation.target_path)
        record_builds(context, settings, manifest, invocation)

    return dbt_models
