"""The dbt project as Dagster assets: keys, lineage, daily partitions over hourly bronze, and real runs of a window of
hours and of a whole day, with publish."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.definitions import build_definitions
from logistics_platform.defs.constants import INGEST_JOB
from logistics_platform.defs.transform.assets import DBT_ASSETS_NAME, build_dbt_assets, ingest_watermark
from logistics_platform.defs.transform.publish import PUBLISH_ASSET_NAME, build_publish_assets, build_publish_checks
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.operate.transform_pending import WATERMARK_TAG
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.lib.transform.arrival_window import WINDOW_END_TAG, WINDOW_START_TAG, ArrivalWindow
from logistics_platform.lib.transform.project import MART_MODELS, project_target
from logistics_platform.pipeline import QUIET
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, local_settings
from tests.support.transform_world import build_world, write_landing

pytestmark = pytest.mark.slow


def test_dbt_assets_keys_lineage_and_partitions(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    graph = build_definitions(settings).resolve_asset_graph()
    for mart in MART_MODELS:
        node = graph.get(dg.AssetKey(["marts", mart]))
        assert node.group_name == "marts" and isinstance(node.partitions_def, dg.DailyPartitionsDefinition)
        assert node.backfill_policy == dg.BackfillPolicy.single_run()
        published = graph.get(dg.AssetKey(["iceberg_marts", mart]))
        assert dg.AssetKey(["marts", mart]) in published.parent_keys and published.partitions_def is None
    for table in ("tenants", "couriers", "orders", "payments", "tracking_pings"):
        stg = graph.get(dg.AssetKey(["staging", f"stg_{table}"]))
        assert stg.group_name == "staging"
        # Lineage landing -> bronze -> staging: the dbt source is the bronze asset itself; a day reads its hours.
        assert stg.parent_keys == {dg.AssetKey(["bronze", table])}
        assert stg.partition_mappings == {dg.AssetKey(["bronze", table]): dg.TimeWindowPartitionMapping()}
        assert isinstance(graph.get(dg.AssetKey(["bronze", table])).partitions_def, dg.HourlyPartitionsDefinition)
        assert dg.AssetKey(["landing", table]) in graph.get(dg.AssetKey(["bronze", table])).parent_keys
    assert graph.get(dg.AssetKey(["intermediate", "int_tenant_versions"])).group_name == "intermediate"
    checks = {k.name for k in graph.asset_check_keys if k.asset_key == dg.AssetKey(["marts", "fct_orders"])}
    assert "unique_fct_orders_order_id" in checks


def _staged_window(settings: Settings, run_id: str) -> str:
    """The arrival-hour filter stg_orders ran with in a run's dbt invocation (from its compiled SQL)."""
    (target,) = project_target(settings).glob(f"*-{run_id[:7]}-*")
    results = json.loads((target / "run_results.json").read_text())["results"]
    (sql,) = [r["compiled_code"] for r in results if r["unique_id"].endswith(".stg_orders")]
    line = next(line.strip() for line in sql.splitlines() if "_arrival_hour between" in line)
    return line.removeprefix("and ").removeprefix("where ")


def test_a_window_of_hours_and_a_whole_day_are_one_dbt_run_each(tmp_path: Path) -> None:
    settings = local_settings(tmp_path, partitions_start="2026-11-02-00:00")
    world = build_world(hours=6, orders_per_hour=6, seed=31)
    write_landing(world, settings.landing_dir)
    assets = [build_dbt_assets(settings), build_publish_assets()]
    ingest = build_definitions(settings).resolve_job_def(INGEST_JOB)
    with dg.instance_for_test() as instance:
        hours = {
            "dagster/asset_partition_range_start": hour_key(world.hours[0]),
            "dagster/asset_partition_range_end": hour_key(world.hours[-1]),
        }
        assert ingest.execute_in_process(instance=instance, tags=hours, run_config=QUIET).success
        # The day partition, as a UI materialization or a backfill of the day runs it: every hour of the day.
        first = dg.materialize(assets[:1], resources=build_resources(settings), partition_key="2026-11-02")
        assert first.success
        # Launched for its day only, it names the hours it built in its tags (as the UI shows them) and metadata.
        tags = first.dagster_run.tags
        assert (tags[WINDOW_START_TAG], tags[WINDOW_END_TAG]) == ("2026-11-02-00:00", "2026-11-02-23:00")
        built = {
            e.step_materialization_data.materialization.metadata["arrival_hours"].value
            for e in first.get_asset_materialization_events()
        }
        assert built == {"2026-11-02-00:00..2026-11-02-23:00"}

        # A run asks for two hours of the day (as the transform sensor asks for the hours it found ingested).
        window = ArrivalWindow(datetime(2026, 11, 2, 4), datetime(2026, 11, 2, 5))
        result = dg.materialize(
            [*assets, *build_publish_checks()],
            resources=build_resources(settings),
            tags=window.run_tags(),
            instance=instance,
        )
        assert result.success
        # One step per multi-asset: the window is one dbt invocation, then one publish.
        steps = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"}
        assert steps == {DBT_ASSETS_NAME, PUBLISH_ASSET_NAME, "published_marts_match_duckdb"}
        events = result.get_asset_materialization_events()
        dbt_events = [e for e in events if e.asset_key in assets[0].keys]
        # One materialization per model and DAY, naming the hours it built.
        assert {e.partition for e in dbt_events} == {"2026-11-02"} and len(dbt_events) == len(assets[0].keys)
        built = {e.step_materialization_data.materialization.metadata["arrival_hours"].value for e in dbt_events}
        assert built == {"2026-11-02-04:00..2026-11-02-05:00"}
        # dbt read exactly those hours of bronze (and the hour before, the lookback for a delayed file).
        assert _staged_window(settings, result.run_id) == (
            "_arrival_hour between (timestamp '2026-11-02 04:00:00' - interval 1 hour) "
            "and timestamp '2026-11-02 05:00:00'"
        )
        # The run names its hours and the ingest it built up to (the transform sensor counts it).
        tags = instance.get_run_by_id(result.run_id).tags  # type: ignore[union-attr]
        assert (tags[WINDOW_START_TAG], tags[WINDOW_END_TAG]) == ("2026-11-02-04:00", "2026-11-02-05:00")
        assert int(tags[WATERMARK_TAG]) == ingest_watermark(instance) > 0

        # The day again (the tables exist now, so dbt filters): every hour of it.
        again = dg.materialize(assets[:1], resources=build_resources(settings), partition_key="2026-11-02")
        assert again.success
        assert _staged_window(settings, again.run_id) == (
            "_arrival_hour between (timestamp '2026-11-02 00:00:00' - interval 1 hour) "
            "and timestamp '2026-11-02 23:00:00'"
        )

    # What the first run published.
    materialized = {(e.asset_key.to_user_string(), e.partition) for e in events}
    assert ("marts/fct_orders", "2026-11-02") in materialized
    # The publish replaces each mart's whole published state: one materialization per run, not one per day.
    published = [(k, p) for k, p in materialized if k.startswith("iceberg_marts/")]
    assert sorted(published) == sorted((f"iceberg_marts/{m}", None) for m in MART_MODELS)
    evaluations = result.get_asset_check_evaluations()
    failed = [
        (e.asset_key.to_user_string(), e.check_name)
        for e in evaluations
        if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR
    ]
    assert evaluations and not failed, failed
    catalog = load_catalog(settings)
    assert catalog.load_table("marts.fct_orders").scan().to_arrow().num_rows > 0
    # A subset picked in the UI runs only its dbt nodes (and their tests): dagster-dbt selects them.
    subset = dg.materialize(
        [*assets, *build_publish_checks()],
        resources=build_resources(settings),
        selection=[dg.AssetKey(["marts", "dim_tenant"])],
        partition_key="2026-11-02",
    )
    assert subset.success
    assert {e.asset_key.to_user_string() for e in subset.get_asset_materialization_events()} == {"marts/dim_tenant"}
    subset_checks = {(e.asset_key.to_user_string(), e.check_name) for e in subset.get_asset_check_evaluations()}
    assert subset_checks and {key for key, _ in subset_checks} == {"marts/dim_tenant"}
    # dbt built the tenant set dim_tenant reads too, for this run's window (not reported: it was not selected).
    [subset_target] = sorted(project_target(settings).glob(f"*-{subset.run_id[:7]}-*"))
    subset_built = json.loads((subset_target / "run_results.json").read_text())["results"]
    assert {r["unique_id"].split(".")[-1] for r in subset_built if r["unique_id"].startswith("model.")} == {
        "int_affected_tenant_ids",
        "dim_tenant",
    }
    # One hour: every model runs (dbt's incremental models filter the window) and is reported for its day.
    one_hour = ArrivalWindow(datetime(2026, 11, 2, 6), datetime(2026, 11, 2, 6)).run_tags()
    hourly = dg.materialize(assets[:1], resources=build_resources(settings), tags=one_hour)
    assert hourly.success
    assert len(hourly.get_asset_materialization_events()) == len(assets[0].keys)
    # dbt ran as a child process of the step, in a target directory of its own, and left its artifacts there.
    runs = sorted(project_target(settings).glob(f"*-{hourly.run_id[:7]}-*"))
    assert len(runs) == 1 and (runs[0] / "run_results.json").exists()
    results = json.loads((runs[0] / "run_results.json").read_text())["results"]
    ran = {r["unique_id"].split(".")[-1] for r in results}
    assert "fct_orders" in ran and "dim_tenant" in ran
    # Data tests run with the models; dbt's unit tests are left to CI (tests/transform/test_dbt.py runs them).
    kinds = {r["unique_id"].split(".")[0] for r in results}
    assert "test" in kinds and "unit_test" not in kinds, kinds
    # Nor do the sources' tests, which read every bronze row (dbt names them source_<test>_<source>_<table>...).
    assert not [r["unique_id"] for r in results if r["unique_id"].split(".")[2].startswith("source_")]
