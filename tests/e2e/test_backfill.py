"""A UI backfill of a range of arrival hours runs the bronze ingest in ranges: ceil(hours / per-run) runs.

`dagster dev` (webserver + daemon) with INGEST_MAX_HOURS_PER_RUN=2; the `launchPartitionBackfill` GraphQL mutation
the UI's "Launch backfill" sends, for the bronze assets over 5 arrival hours: 3 runs (2 + 2 + 1 hours), every hour
materialized and in the ingest log.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.settings import PROJECT_ROOT, local_settings, subprocess_env
from tests.e2e.test_ui import FINAL_STATUSES, GraphQL, _free_port, _wait_until_loaded

HOURS = [f"2026-11-01-{h:02d}:00" for h in range(5)]
PER_RUN = 2
BACKFILL_DEADLINE_S = 900  # an upper bound of the wait, not a measurement


def _bronze_backfill(gql: GraphQL, keys: list[list[str]]) -> tuple[str, list[dict[str, Any]]]:
    launched = gql(
        """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
            __typename ... on LaunchBackfillSuccess { backfillId }
            ... on PythonError { message } ... on InvalidSubsetError { message } } }""",
        params={
            "partitionsByAssets": [
                {"assetKey": {"path": k}, "partitions": {"range": {"start": HOURS[0], "end": HOURS[-1]}}} for k in keys
            ],
            "title": "e2e: bronze range",
        },
    )["launchPartitionBackfill"]
    if launched["__typename"] != "LaunchBackfillSuccess":
        gql.fail(f"backfill not launched: {launched}")
    backfill_id = launched["backfillId"]
    deadline = time.monotonic() + BACKFILL_DEADLINE_S
    status = None
    while time.monotonic() < deadline:
        status = gql(
            """query($id: String!) { partitionBackfillOrError(backfillId: $id) {
                ... on PartitionBackfill { status } } }""",
            id=backfill_id,
        )["partitionBackfillOrError"]["status"]
        if status in FINAL_STATUSES:
            break
        time.sleep(2)
    else:
        gql.fail(f"backfill {backfill_id} still {status} at the deadline")
    runs = gql(
        """query($id: String!) { runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
            ... on Runs { results { runId status tags { key value } } } } }""",
        id=backfill_id,
    )["runsOrError"]["results"]
    if status not in ("COMPLETED", "COMPLETED_SUCCESS") or any(r["status"] != "SUCCESS" for r in runs):
        gql.fail(f"backfill ended {status}; runs: {runs}")
    return str(status), runs


@pytest.mark.slow
def test_ui_backfill_of_a_range_runs_in_ranges(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "state")
    generate(
        settings.landing_dir,
        GeneratorConfig(
            start=datetime(2026, 11, 1),
            hours=len(HOURS),
            seed=13,
            tenants=3,
            couriers=8,
            orders_per_day=240,
            pings_per_day=480,
            delayed_files=0,
        ),
    )
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    env = subprocess_env(settings)
    env.update(
        {
            "DAGSTER_HOME": str(home),
            "ALERTS_LOG": str(settings.alerts_log),
            "AUTOMATION_DEFAULT_STATUS": "stopped",  # only the backfill writes
            "PARTITIONS_START": settings.partitions_start,
            "INGEST_MAX_HOURS_PER_RUN": str(PER_RUN),
        }
    )
    port = _free_port()
    log = tmp_path / "dagster_dev.log"
    bin_dir = Path(sys.executable).parent
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(bin_dir / "dagster"),
                "dev",
                "-w",
                str(PROJECT_ROOT / "workspace.yaml"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    gql = GraphQL(port, log)
    try:
        _wait_until_loaded(gql, proc)
        nodes = gql("{ assetNodes { assetKey { path } groupName isMaterializable } }")["assetNodes"]
        bronze = sorted(n["assetKey"]["path"] for n in nodes if n["groupName"] == "bronze" and n["isMaterializable"])
        _, runs = _bronze_backfill(gql, bronze)
        ranges = sorted(
            (
                tags.get("dagster/asset_partition_range_start", tags.get("dagster/partition")),
                tags.get("dagster/asset_partition_range_end", tags.get("dagster/partition")),
            )
            for tags in ({t["key"]: t["value"] for t in r["tags"]} for r in runs)
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
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    logged = read_ingest_log(settings)
    assert {h for _, h in logged} == set(HOURS)
    assert all(e.balanced for e in logged.values())
