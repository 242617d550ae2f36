"""The dbt project as Dagster assets: keys, lineage, partitions, and a real partition-range run with publish."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.definitions import build_definitions
from logistics_platform.defs.transform.assets import DBT_ASSETS_NAME, build_dbt_assets
from logistics_platform.defs.transform.checks import build_publish_checks
from logistics_platform.defs.transform.publish import PUBLISH_ASSET_NAME, build_publish_assets
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS, dbt_project, project_target
from logistics_platform.lib.transform.window_plan import plan_window
from logistics_platform.resources import build_resources
from logistics_platform.settings import local_settings
from tests.support.transform_world import build_world, write_landing

pytestmark = pytest.mark.slow


def test_dbt_assets_keys_lineage_and_partitions(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    graph = build_definitions(settings).resolve_asset_graph()
    for mart in MART_MODELS:
        node = graph.get(dg.AssetKey(["marts", mart]))
        assert node.group_name == "marts" and node.partitions_def is not None
        assert node.backfill_policy == dg.BackfillPolicy.single_run()
        published = graph.get(dg.AssetKey(["iceberg_marts", mart]))
        assert dg.AssetKey(["marts", mart]) in published.parent_keys and published.partitions_def is None
    for table in ("tenants", "couriers", "orders", "payments", "tracking_pings"):
        stg = graph.get(dg.AssetKey(["staging", f"stg_{table}"]))
        assert stg.group_name == "staging"
        # Lineage landing -> bronze -> staging: the dbt source is the bronze asset itself.
        assert stg.parent_keys == {dg.AssetKey(["bronze", table])}
        assert dg.AssetKey(["landing", table]) in graph.get(dg.AssetKey(["bronze", table])).parent_keys
    assert graph.get(dg.AssetKey(["intermediate", "int_tenant_versions"])).group_name == "intermediate"
    checks = {k.name for k in graph.asset_check_keys if k.asset_key == dg.AssetKey(["marts", "fct_orders"])}
    assert "unique_fct_orders_order_id" in checks


def test_partition_range_is_one_dbt_run_that_builds_and_publishes(tmp_path: Path) -> None:
    settings = local_settings(tmp_path, partitions_start="2026-11-02-00:00")
    world = build_world(hours=3, orders_per_hour=6, seed=31)
    write_landing(world, settings.landing_dir)
    for hour in world.hours:
        ingest_hour(settings, hour)
    assets = [build_dbt_assets(settings), build_publish_assets()]
    result = dg.materialize(
        [*assets, *build_publish_checks()],
        resources=build_resources(settings),
        tags={
            "dagster/asset_partition_range_start": "2026-11-02-00:00",
            "dagster/asset_partition_range_end": "2026-11-02-02:00",
        },
    )
    assert result.success
    # One step per multi-asset: the whole range is one dbt invocation, then one publish.
    steps = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"}
    assert steps == {DBT_ASSETS_NAME, PUBLISH_ASSET_NAME, "published_marts_match_duckdb"}
    materialized = {(e.asset_key.to_user_string(), e.partition) for e in result.get_asset_materialization_events()}
    assert ("marts/fct_orders", "2026-11-02-01:00") in materialized
    # The publish replaces each mart's whole published state: one materialization per run, not one per hour.
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
        partition_key="2026-11-02-02:00",
    )
    assert subset.success
    assert {e.asset_key.to_user_string() for e in subset.get_asset_materialization_events()} == {"marts/dim_tenant"}
    subset_checks = {(e.asset_key.to_user_string(), e.check_name) for e in subset.get_asset_check_evaluations()}
    assert subset_checks and {key for key, _ in subset_checks} == {"marts/dim_tenant"}
    # An hour with no rows for some bronze tables skips their models and reports them as no-op materializations;
    # the others run. (Hour 03 re-reads hour 02 through the lookback, which has no tenant or courier change.)
    manifest = json.loads(dbt_project(settings).manifest_path.read_text())
    plan = plan_window(settings, manifest, datetime(2026, 11, 2, 3), datetime(2026, 11, 2, 3))
    assert {"dim_courier", "stg_couriers", "dim_tenant"} <= set(plan.idle) and "fct_orders" not in plan.idle
    # The seed and the view are as the range run built them (it recorded their fingerprints): skipped too.
    assert set(plan.unchanged) == {"tier_pricing", "stg_folded_windows"} <= set(plan.idle)
    hourly = dg.materialize(assets[:1], resources=build_resources(settings), partition_key="2026-11-02-03:00")
    assert hourly.success
    statuses = {
        e.asset_key.path[-1]: e.step_materialization_data.materialization.metadata["status"].value
        for e in hourly.get_asset_materialization_events()
    }
    assert {m for m, status in statuses.items() if status == "no-op"} == set(plan.idle)
    assert statuses["fct_orders"] == "success" and len(statuses) == len(assets[0].keys)
    # dbt ran as a child process of the step, in a target directory of its own, and left its artifacts there.
    runs = sorted((project_target(settings) / "runs").glob(f"{hourly.run_id[:8]}-*"))
    assert len(runs) == 1 and (runs[0] / "run_results.json").exists()
    results = json.loads((runs[0] / "run_results.json").read_text())["results"]
    ran = {r["unique_id"].split(".")[-1] for r in results}
    assert "fct_orders" in ran and not ran & set(plan.idle)
    # Data tests run with the models; dbt's unit tests are left to CI (tests/transform/test_dbt.py runs them).
    kinds = {r["unique_id"].split(".")[0] for r in results}
    assert "test" in kinds and "unit_test" not in kinds, kinds
