"""Dagster definitions for the transform domain: the dbt project as assets, and the publish of marts to Iceberg.

Thin glue: dbt does the work (``dbt_project/``), :mod:`logistics_platform.lib.transform.project` turns a partition
range into dbt vars, :mod:`logistics_platform.lib.transform.publish` writes the marts to the Iceberg namespace
``marts``.

Partitioning: every dbt asset is partitioned by arrival hour, like bronze (identity mapping: staging hour H reads the
bronze rows that arrived in hour H, plus a lookback). A partition range runs as ONE ``dbt build`` (single-run
backfill policy) with vars min_arrival_hour/max_arrival_hour; every model is idempotent per window, so re-running any
partition is safe and any order of partitions gives the tables a full refresh gives.
"""

# No `from __future__ import annotations`: Dagster reads the asset function annotations at runtime.

import queue
import threading
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_dbt import (
    DagsterDbtTranslator,
    DagsterDbtTranslatorSettings,
    DbtProject,
    dbt_assets,
    get_asset_key_for_model,
)
from dagster_dbt.asset_utils import (
    DAGSTER_DBT_EXCLUDE_METADATA_KEY,
    DAGSTER_DBT_SELECT_METADATA_KEY,
    DAGSTER_DBT_SELECTOR_METADATA_KEY,
    get_manifest_and_translator_from_dbt_assets,
    get_subset_selection_for_context,
)
from dagster_dbt.core.dbt_cli_event import DbtCoreCliEventMessage
from dagster_duckdb import DuckDBResource

from logistics_platform.defs.constants import DUCKDB_POOL, OWNERS, PUBLISHED_KEYS
from logistics_platform.defs.constants import DUCKDB_WRITER_TAGS as WRITER_TAGS
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.lib.connections import load_catalog, load_extensions
from logistics_platform.lib.transform.dbt_inprocess import invoke_dbt, prune_run_targets, seed_partial_parse
from logistics_platform.lib.transform.project import MART_MODELS, DbtRun, run_dbt, window_vars_from_range
from logistics_platform.lib.transform.publish import ORDERS_MART, publish_marts
from logistics_platform.lib.transform.window_plan import WindowPlan, plan_window, record_static_builds
from logistics_platform.settings import DBT_PROJECT_DIR, Settings

LAYERS = ("staging", "intermediate", "marts")
DBT_ASSETS_NAME = "dbt_models"
PUBLISH_ASSET_NAME = "publish_marts"
# Files whose change makes the parsed manifest stale.
_PROJECT_GLOBS = ("dbt_project.yml", "profiles.yml", "models/**/*", "macros/**/*", "seeds/**/*", "tests/**/*")


class LogisticsDbtTranslator(DagsterDbtTranslator):
    """Keys ``[layer, model]``, group = layer, and sources mapped onto the bronze assets (``["bronze", table]``)."""

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        kind = dbt_resource_props["resource_type"]
        name = dbt_resource_props["name"]
        if kind == "source":
            return dg.AssetKey([dbt_resource_props["source_name"], name])
        if kind == "seed":
            return dg.AssetKey(["reference", name])
        return dg.AssetKey([self._layer(dbt_resource_props), name])

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        if dbt_resource_props["resource_type"] == "seed":
            return "staging"  # reference data loaded with the first layer
        return self._layer(dbt_resource_props)

    def get_owners(self, dbt_resource_props: Mapping[str, Any]) -> list[str] | None:
        return OWNERS

    def get_tags(self, dbt_resource_props: Mapping[str, Any]) -> Mapping[str, str]:
        return {**super().get_tags(dbt_resource_props), **WRITER_TAGS}

    @staticmethod
    def _layer(props: Mapping[str, Any]) -> str:
        fqn = props.get("fqn") or []
        layer = fqn[1] if len(fqn) > 2 else ""
        if layer not in LAYERS:
            raise ValueError(
                f"dbt model {props.get('name')} is in {'/'.join(fqn)}: put models under models/<layer>/ with layer "
                f"in {', '.join(LAYERS)}"
            )
        return layer


def _manifest_is_stale(project: DbtProject) -> bool:
    if not project.manifest_path.exists():
        return True
    built = project.manifest_path.stat().st_mtime
    root = Path(project.project_dir)
    return any(p.stat().st_mtime > built for g in _PROJECT_GLOBS for p in root.glob(g) if p.is_file())


def dbt_project(settings: Settings) -> DbtProject:
    """The dbt project with a manifest that matches the files on disk (parsed offline, at load time, if stale)."""
    project = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR, target=settings.dbt_target)
    # Not prepare_if_dev(): under `dagster dev` it runs the `dbt` found on PATH, which a venv that is not activated
    # (make, CI) does not have. run_dbt uses the dbt installed beside this interpreter.
    if _manifest_is_stale(project):
        # `dbt parse` needs no database: a clean clone loads (and `dagster definitions validate` passes) offline.
        run_dbt(settings, ["parse", "--quiet"], target_path=Path(project.project_dir) / project.target_path)
    return project


class DbtBuildConfig(dg.Config):
    """Run options of the dbt assets."""

    full_refresh: bool = False


_DONE = object()


def dbt_selection(
    context: dg.AssetExecutionContext, manifest: Mapping[str, Any], translator: DagsterDbtTranslator
) -> list[str]:
    """dbt selection flags for the assets and checks this step materializes (a subset from the UI included)."""
    args, indirect = get_subset_selection_for_context(
        context=context,
        manifest=manifest,
        select=context.op.tags.get(DAGSTER_DBT_SELECT_METADATA_KEY),
        exclude=context.op.tags.get(DAGSTER_DBT_EXCLUDE_METADATA_KEY),
        selector=context.op.tags.get(DAGSTER_DBT_SELECTOR_METADATA_KEY),
        dagster_dbt_translator=translator,
        current_dbt_indirect_selection_env=None,
    )
    return [*args, *(["--indirect-selection", indirect] if indirect else [])]


def window_plan(
    context: dg.AssetExecutionContext,
    settings: Settings,
    manifest: Mapping[str, Any],
    start: datetime,
    end: datetime,
) -> WindowPlan | None:
    """The models these arrival hours leave unchanged; None (run everything) if bronze or DuckDB cannot be probed."""
    try:
        plan = plan_window(settings, manifest, start, end - timedelta(hours=1))
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


def run_streaming(
    settings: Settings, args: list[str], dbt_vars: dict[str, str], target: Path
) -> Iterator[dict[str, Any] | DbtRun]:
    """Run dbt in-process on a worker thread; yield each node's result event as it finishes, then the DbtRun.

    Raises :class:`DbtError` after the last event when dbt failed, so the asset still reports what did succeed.
    """
    events: queue.Queue[Any] = queue.Queue()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["run"] = invoke_dbt(settings, args, target_path=target, window=dbt_vars, on_result=events.put)
        except BaseException as exc:  # handed to the step's thread, which raises it
            outcome["error"] = exc
        finally:
            events.put(_DONE)

    worker = threading.Thread(target=work, name="dbt", daemon=True)
    worker.start()
    while (event := events.get()) is not _DONE:
        yield event
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    yield outcome["run"]


def build_dbt_assets(settings: Settings) -> dg.AssetsDefinition:
    project = dbt_project(settings)
    partitions = arrival_hour_partitions(settings)

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
        context: dg.AssetExecutionContext, settings: dg.ResourceParam[Settings], config: DbtBuildConfig
    ) -> Iterator[Any]:
        """dbt build of staging, intermediate and marts for the partition range of arrival hours (one run)."""
        window = context.partition_time_window
        dbt_vars = window_vars_from_range(window.start, window.end)
        manifest, translator, _ = get_manifest_and_translator_from_dbt_assets([context.assets_def])
        plan = None if config.full_refresh else window_plan(context, settings, manifest, window.start, window.end)
        args = [
            "build",
            *(["--full-refresh"] if config.full_refresh else []),
            *dbt_selection(context, manifest, translator),
            *(plan.exclude_args() if plan else []),
        ]
        context.log.info(
            f"dbt {' '.join(args)} (arrival hours {dbt_vars['min_arrival_hour']} .. {dbt_vars['max_arrival_hour']})"
        )
        project_target = Path(project.project_dir) / project.target_path
        # One target directory per invocation (artifacts of concurrent runs never mix), seeded with the project's
        # partial-parse state so dbt does not parse the whole project again.
        prune_run_targets(project_target / "runs")
        target = project_target / "runs" / f"{context.run.run_id[:8]}-{uuid.uuid4().hex[:6]}"
        seed_partial_parse(project_target, target)
        for model in plan.idle if plan else ():
            key = get_asset_key_for_model([context.assets_def], model)
            if key in context.selected_asset_keys:
                # Processing these hours is a no-op for the model: its partitions are as up to date as the others.
                # Yielded first: an idle model's inputs are bronze and other idle models (topological order).
                reason = (
                    "unchanged since its last build (file, config and SQL)"
                    if plan and model in plan.unchanged
                    else "no bronze rows for its sources in these arrival hours"
                )
                yield dg.Output(
                    None, output_name=key.to_python_identifier(), metadata={"status": "no-op", "reason": reason}
                )
        for event in run_streaming(settings, args, dbt_vars, target):
            if isinstance(event, DbtRun):
                context.log.info(f"dbt finished in {event.seconds:.1f}s ({len(event.timings)} nodes)")
                # So that the next runs skip the seeds and views this one built until they change.
                try:
                    record_static_builds(settings.duckdb_path, manifest, event.results)
                except Exception as exc:  # only saves later runs time: they rebuild what is not recorded
                    context.log.warning(f"Could not record the seeds and views built: {exc}")
                continue
            message = DbtCoreCliEventMessage(raw_event=event, event_history_metadata={})
            context.log.info(str(message))
            yield from message.to_default_asset_events(
                manifest=manifest, dagster_dbt_translator=translator, context=context, target_path=target
            )

    return dbt_models


def build_publish_assets(settings: Settings) -> dg.AssetsDefinition:
    @dg.multi_asset(
        name=PUBLISH_ASSET_NAME,
        pool=DUCKDB_POOL,
        specs=[
            dg.AssetSpec(
                key=PUBLISHED_KEYS[m],
                deps=[dg.AssetKey(["marts", m])],
                group_name="marts",
                description=(
                    f"marts.{m} published to the Iceberg namespace `marts` (one atomic commit)"
                    + (
                        ", partitioned by bucket(order_id); only changed buckets are rewritten"
                        if m == ORDERS_MART
                        else ""
                    )
                    + "."
                ),
                kinds={"iceberg"},
                owners=OWNERS,
                tags=WRITER_TAGS,
            )
            for m in MART_MODELS
        ],
        partitions_def=arrival_hour_partitions(settings),
        backfill_policy=dg.BackfillPolicy.single_run(),
        op_tags=WRITER_TAGS,
        retry_policy=dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL),
    )
    def publish(
        context: dg.AssetExecutionContext, duckdb: DuckDBResource, settings: dg.ResourceParam[Settings]
    ) -> Iterator[dg.MaterializeResult]:
        """Write every DuckDB mart to the Iceberg namespace `marts`, one commit per table."""
        catalog = load_catalog(settings)
        with duckdb.get_connection() as con:
            load_extensions(con)
            reports = publish_marts(catalog, con, progress=context.log.info)
        for mart, report in reports.items():
            metadata: dict[str, Any] = {
                "dagster/row_count": report.rows,
                "snapshot_id": str(report.snapshot_id),
                "duration_seconds": round(report.seconds, 3),
            }
            if mart == ORDERS_MART:
                metadata["buckets_rewritten"] = dg.MetadataValue.json(report.buckets_rewritten)
            yield dg.MaterializeResult(asset_key=PUBLISHED_KEYS[mart], metadata=metadata)

    return publish


def build_publish_checks() -> list[dg.AssetChecksDefinition]:
    """Python-side check on the marts: what Iceberg serves equals what DuckDB built (row counts)."""

    @dg.multi_asset_check(
        specs=[dg.AssetCheckSpec("matches_duckdb", asset=PUBLISHED_KEYS[m]) for m in MART_MODELS],
        name="published_marts_match_duckdb",
    )
    def published_marts_match_duckdb(
        context: dg.AssetCheckExecutionContext, duckdb: DuckDBResource, settings: dg.ResourceParam[Settings]
    ) -> Iterator[dg.AssetCheckResult]:
        catalog = load_catalog(settings)
        with duckdb.get_connection() as con:
            load_extensions(con)
            for mart in MART_MODELS:
                built = con.sql(f"select count(*) from marts.{mart}").fetchone()
                table = catalog.load_table(f"marts.{mart}")
                snap = table.current_snapshot()
                served = int(snap.summary["total-records"]) if snap and snap.summary else 0
                expected = int(built[0]) if built else 0
                yield dg.AssetCheckResult(
                    asset_key=PUBLISHED_KEYS[mart],
                    check_name="matches_duckdb",
                    passed=served == expected,
                    metadata={"iceberg_rows": served, "duckdb_rows": expected},
                    description=None
                    if served == expected
                    else (f"Iceberg marts.{mart} has {served} rows, DuckDB {expected}: re-run the publish step"),
                )

    return [published_marts_match_duckdb]


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


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""
    return dg.Definitions(
        assets=[build_dbt_assets(settings), build_publish_assets(settings), FOLDED_WINDOWS_SPEC],
        asset_checks=build_publish_checks(),
    )
