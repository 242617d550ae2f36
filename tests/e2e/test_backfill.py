"""A UI backfill of a range of arrival hours runs the bronze ingest in ranges: ceil(hours / per-run) runs.

`dagster dev` (webserver + daemon) with INGEST_MAX_HOURS_PER_RUN=2; the `launchPartitionBackfill` GraphQL mutation
the UI's "Launch backfill" sends, for the bronze assets over 5 arrival hours: 3 runs (2 + 2 + 1 hours), every hour
materialized and in the ingest log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.settings import local_settings
from tests.support.dagster_ui import asset_keys, backfill, dagster_dev, land_small_world

HOURS = [f"2026-11-01-{h:02d}:00" for h in range(5)]
PER_RUN = 2


@pytest.mark.slow
def test_ui_backfill_of_a_range_runs_in_ranges(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "state")
    land_small_world(settings, hours=len(HOURS), seed=13)
    with dagster_dev(settings, tmp_path, INGEST_MAX_HOURS_PER_RUN=str(PER_RUN)) as gql:
        runs = backfill(gql, asset_keys(gql, ("bronze",)), HOURS[0], HOURS[-1], "e2e: bronze range")
        ranges = sorted(
            (
                r["tags"].get("dagster/asset_partition_range_start", r["tags"].get("dagster/partition")),
                r["tags"].get("dagster/asset_partition_range_end", r["tags"].get("dagster/partition")),
            )
            for r in runs
        )
        assert ranges == [(HOURS[0], HOURS[1]), (HOURS[2], HOURS[3]), (HOURS[4], HOURS[4])], runs
        materialized = gql(
            """query($path: [String!]!) { assetNodeOrError(assetKey: {path: $path}) {
                ... on AssetNode { assetPartitionStatuses { ... on TimePartitionStatuses {
                    ranges { startKey endKey status } } } } } }""",
            path=["bronze", "ingest_log"],
        )["assetNodeOrError"]["assetPartitionStatuses"]["ranges"]
        assert [(r["startKey"], r["endKey"]) for r in materialized if r["status"] == "MATERIALIZED"] == [
            (HOURS[0], HOURS[-1])
        ]

    logged = read_ingest_log(load_catalog(settings))
    assert {h for _, h in logged} == set(HOURS)
    assert all(e.balanced for e in logged.values())
