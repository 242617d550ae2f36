"""End to end through the UI's API: `dagster dev` (webserver + daemon) runs partition-range backfills.

The backfills are launched with the `launchPartitionBackfill` GraphQL mutation that the UI's "Launch backfill"
button sends: the bronze assets for 5 arrival hours (hourly partitions), which run in ranges of
INGEST_MAX_HOURS_PER_RUN (2 here: 3 runs of 2 + 2 + 1 hours), then every dbt asset for their arrival day (daily
partitions) with the published marts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.lib.transform.arrival_window import WINDOW_END_TAG, WINDOW_START_TAG
from logistics_platform.lib.transform.project import MART_MODELS, project_target
from logistics_platform.settings import local_settings
from tests.support.dagster_ui import asset_keys, backfill, dagster_dev, land_small_world

HOURS = [f"2026-11-01-{h:02d}:00" for h in range(5)]
PER_RUN = 2
DAY = "2026-11-01"
LAYERS = ("bronze", "staging", "intermediate", "marts")


@pytest.mark.slow
def test_partition_range_backfill_through_graphql(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "state")
    land_small_world(settings, hours=len(HOURS), seed=11)
    with dagster_dev(settings, tmp_path, INGEST_MAX_HOURS_PER_RUN=str(PER_RUN)) as gql:
        keys = asset_keys(gql, LAYERS)
        assert any(k[0] == "bronze" for k in keys) and any(k[0] == "marts" for k in keys), keys

        # Bronze first, then the dbt layer: one backfill of everything would start a dbt run each time some
        # hours finish ingesting (the backfill daemon requests what is ready), and those runs queue on DuckDB.
        bronze = [k for k in keys if k[0] == "bronze"]
        downstream = [k for k in keys if k[0] != "bronze"]
        ingest_runs = backfill(gql, bronze, HOURS[0], HOURS[-1], "e2e: bronze")
        ranges = sorted(
            (
                r["tags"].get("dagster/asset_partition_range_start", r["tags"].get("dagster/partition")),
                r["tags"].get("dagster/asset_partition_range_end", r["tags"].get("dagster/partition")),
            )
            for r in ingest_runs
        )
        assert ranges == [(HOURS[0], HOURS[1]), (HOURS[2], HOURS[3]), (HOURS[4], HOURS[4])], ingest_runs
        materialized = gql(
            """query($path: [String!]!) { assetNodeOrError(assetKey: {path: $path}) {
                ... on AssetNode { assetPartitionStatuses { ... on TimePartitionStatuses {
                    ranges { startKey endKey status } } } } } }""",
            path=["bronze", "ingest_log"],
        )["assetNodeOrError"]["assetPartitionStatuses"]["ranges"]
        assert [(r["startKey"], r["endKey"]) for r in materialized if r["status"] == "MATERIALIZED"] == [
            (HOURS[0], HOURS[-1])
        ]
        # The published marts are not partitioned (a publish replaces a mart's whole state): selected with the
        # dbt layer, as "Materialize selected" over the marts group does, they are published once, after it.
        published = [k for k in asset_keys(gql, ("marts",), partitioned=False) if k[0] == "iceberg_marts"]
        assert len(published) == len(MART_MODELS), published
        runs = backfill(gql, downstream, DAY, DAY, "e2e: dbt layer", unpartitioned=published)
        dbt_runs = [
            r
            for r in runs
            if DAY in (r["tags"].get("dagster/asset_partition_range_start"), r["tags"].get("dagster/partition"))
        ]
        assert len(dbt_runs) == 1, runs  # the day in one run (BackfillPolicy.single_run)
        assert len(runs) <= 2, runs  # and at most one more: the publish
        # A backfill of a day builds every arrival hour of it, and the run says so in the UI (its tags).
        tags = dbt_runs[0]["tags"]
        assert (tags[WINDOW_START_TAG], tags[WINDOW_END_TAG]) == ("2026-11-01-00:00", "2026-11-01-23:00")
        # The run's dbt step ran dbt through DbtCliResource: a dbt process of its own, in a target directory of
        # its own under the manifest's, where it left its run results.
        (run_target,) = project_target(settings).glob(f"*-{dbt_runs[0]['runId'][:7]}-*")
        assert (run_target / "run_results.json").exists()

    logged = read_ingest_log(load_catalog(settings))
    assert {h for _, h in logged} == set(HOURS)
    assert all(e.balanced for e in logged.values())
    con = connect(settings.duckdb_path, read_only=True)
    try:
        delivered = con.execute("select count(*) from marts.fct_orders").fetchone()[0]
        tables = {
            r[0]
            for r in con.execute(
                "select table_name from information_schema.tables where table_schema = 'marts'"
            ).fetchall()
        }
    finally:
        con.close()
    assert delivered > 0
    assert {"fct_orders", "dim_tenant", "fct_daily_revenue", "fct_hourly_region_orders"} <= tables
    served = load_catalog(settings).load_table("marts.fct_orders").scan().to_arrow().num_rows
    assert served == delivered  # the backfill published what dbt built
