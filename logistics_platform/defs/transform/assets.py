"""The dbt project as Dagster assets: one ``dbt build`` a run for a window of arrival hours (docs/internals/glue.md)."""

# No `from __future__ import annotations`: Dagster reads the asset function annotations at runtime.

import json
from collections.abc import Iterator, Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, dbt_assets

from logistics_platform.defs.constants import DUCKDB_POOL, DUCKDB_WRITER_TAGS, INGEST_LOG_KEY, OWNERS
from logistics_platform.defs.partitions import arrival_day_partitions
from logistics_platform.defs.preflight import require_usable_lakehouse
from logistics_platform.lib.bronze.views import BRONZE_SCHEMA
from logistics_platform.lib.operate.transform_pending import WATERMARK_TAG
from logistics_platform.lib.transform.arrival_window import window_within_days
from logistics_platform.lib.transform.project import dbt_invocation_environment, dbt_project, window_vars
from logistics_platform.settings import Settings

DBT_ASSETS_NAME = "dbt_models"
# dbt tag of the affected-set models: the keys one run's window changed, rebuilt whenever a model reading them runs.
AFFECTED_TAG = "affected"

LAYERS = ("staging", "intermediate", "marts")
RETRY_POLICY = dg.RetryPolicy(max_retries=2, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)


class LogisticsDbtTranslator(DagsterDbtTranslator):
    """dagster-dbt's keys (``[schema, name]``: ``[layer, model]``, sources ``[bronze, table]``), groups by layer."""

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        if dbt_resource_props["resource_type"] == "seed":
            return "staging"  # reference data loaded with the first layer
        layer = dbt_resource_props["config"].get("schema")
        if dbt_resource_props["resource_type"] == "model" and layer not in LAYERS:
            raise ValueError(
                f"dbt model {dbt_resource_props['name']} has schema {layer}: put models under models/<layer>/ (which "
                f"dbt_project.yml gives that schema) with layer in {', '.join(LAYERS)}"
            )
        return layer

    def get_owners(self, dbt_resource_props: Mapping[str, Any]) -> list[str] | None:
        return OWNERS

    def get_partition_mapping(
        self, dbt_resource_props: Mapping[str, Any], dbt_parent_resource_props: Mapping[str, Any]
    ) -> dg.PartitionMapping | None:
        # Bronze is hourly, the dbt layer daily: day D depends on the hours of D (stated, not left to the default).
        bronze = dbt_parent_resource_props.get("source_name") == BRONZE_SCHEMA
        return dg.TimeWindowPartitionMapping() if bronze else None

    def get_tags(self, dbt_resource_props: Mapping[str, Any]) -> Mapping[str, str]:
        return {**super().get_tags(dbt_resource_props), **DUCKDB_WRITER_TAGS}


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


def affected_sets_read(manifest: Mapping[str, Any], models: set[str]) -> set[str]:
    """The affected-set models that ``models`` read, directly or through other sets."""
    nodes = manifest["nodes"]
    todo = [uid for uid, n in nodes.items() if n["resource_type"] == "model" and n["name"] in models]
    found: set[str] = set()
    while todo:
        for parent in nodes[todo.pop()]["depends_on"].get("nodes", []):
            if AFFECTED_TAG in nodes.get(parent, {}).get("tags", []) and nodes[parent]["name"] not in found:
                found.add(nodes[parent]["name"])
                todo.append(parent)
    return found


def build_dbt_assets(settings: Settings) -> dg.AssetsDefinition:
    project = dbt_project(settings)
    manifest = json.loads(project.manifest_path.read_text())

    @dbt_assets(
        manifest=project.manifest_path,
        project=project,
        name=DBT_ASSETS_NAME,
        exclude="source:*",  # source tests read all of bronze each run; `dbt test` runs them (docs/design.md)
        partitions_def=arrival_day_partitions(settings),
        backfill_policy=dg.BackfillPolicy.single_run(),
        dagster_dbt_translator=LogisticsDbtTranslator(settings=DagsterDbtTranslatorSettings(enable_asset_checks=True)),
        op_tags=DUCKDB_WRITER_TAGS,
        pool=DUCKDB_POOL,  # DuckDB takes one writer: every run that writes the file, backfill runs included
        retry_policy=RETRY_POLICY,
    )
    def dbt_models(
        context: dg.AssetExecutionContext,
        dbt: DbtCliResource,
        settings: dg.ResourceParam[Settings],
        config: DbtBuildConfig,
    ) -> Iterator[Any]:
        """dbt build of staging, intermediate and marts for the run's window of arrival hours (one dbt invocation)."""
        require_usable_lakehouse(settings)
        # Read before dbt reads bronze: every ingest up to this one is committed in the tables dbt is about to read.
        watermark = ingest_watermark(context.instance)
        days = context.partition_time_window
        try:  # the hours its tags name, else every hour of its day partitions
            window = window_within_days(context.run.tags, days.start, days.end)
        except ValueError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        every_model = set(dbt_models.keys) <= set(context.selected_asset_keys)
        # The hours in the UI's run tags; the watermark the transform sensor counts, when every model is built.
        tags = window.window_tags() | ({WATERMARK_TAG: str(watermark)} if every_model else {})
        context.instance.add_run_tags(context.run_id, tags)
        # dbt's unit tests check model logic on fixed inputs: they belong to CI, not to every run.
        args = ["build", "--exclude-resource-type", "unit_test", *(["--full-refresh"] if config.full_refresh else [])]
        # A subset also builds the affected sets its models read, for this window (not reported: not selected).
        names = {key.path[-1] for key in context.selected_asset_keys}
        if sets := sorted(affected_sets_read(manifest, names) - names):
            args += ["--select", " ".join(sets)]
        dbt_window = window_vars(window.first, window.last)
        context.log.info(f"dbt {' '.join(args)} (arrival hours {' .. '.join(dbt_window.values())})")
        with dbt_invocation_environment(settings, dbt_window):
            invocation = dbt.cli(args, context=context)
        metadata: dict[str, Any] = {"arrival_hours": window.label, "ingest_watermark": watermark}
        selected = {key.to_python_identifier() for key in context.selected_asset_keys}
        # No fetch_column_metadata()/fetch_row_counts(): they would open the DuckDB file dbt is writing.
        for event in invocation.stream():
            if isinstance(event, dg.Output) and event.output_name not in selected:
                continue
            if isinstance(event, dg.Output | dg.AssetMaterialization):
                event = event.with_metadata({**event.metadata, **metadata})
            yield event

    return dbt_models
