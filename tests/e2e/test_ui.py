"""End to end through the UI's API: `dagster dev` (webserver + daemon) runs a partition-range backfill.

The backfills are launched with the `launchPartitionBackfill` GraphQL mutation that the UI's "Launch backfill"
button sends: the bronze assets for 4 arrival hours, then every partitioned dbt/publish asset for that range.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.connections import connect
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.lib.transform.project import project_target
from logistics_platform.settings import PROJECT_ROOT, local_settings, subprocess_env

HOURS = ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00", "2026-11-01-03:00"]
LAYERS = ("bronze", "staging", "intermediate", "marts")
# Upper bounds of the waits (the test fails with the server log if exceeded; they are not measurements).
STARTUP_DEADLINE_S = 300
BACKFILL_DEADLINE_S = 900
FINAL_STATUSES = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GraphQL:
    def __init__(self, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}/graphql"
        self.log = log

    def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables}).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                payload = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"GraphQL HTTP {exc.code}: {exc.read().decode(errors='replace')[:3000]}") from None
        if payload.get("errors"):
            raise AssertionError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def fail(self, message: str) -> None:
        tail = self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""
        pytest.fail(f"{message}\n--- dagster dev log (tail) ---\n{tail}")


def _wait_until_loaded(gql: GraphQL, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    query = """{ workspaceOrError { ... on Workspace { locationEntries { name
        locationOrLoadError { __typename ... on PythonError { message } } } } } }"""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            gql.fail(f"dagster dev exited with {proc.returncode}")
        try:
            entries = gql(query)["workspaceOrError"]["locationEntries"]
        except (urllib.error.URLError, ConnectionError, TimeoutError, AssertionError):
            time.sleep(1)  # not serving yet
            continue
        loaded = [e["locationOrLoadError"] for e in entries if e["locationOrLoadError"]]
        errors = [e["message"] for e in loaded if e["__typename"] == "PythonError"]
        if errors:
            gql.fail(f"code location failed to load: {errors[0]}")
        if loaded and all(e["__typename"] == "RepositoryLocation" for e in loaded):
            return
        time.sleep(1)
    gql.fail("dagster dev did not load the code location in time")


def _partitioned_asset_keys(gql: GraphQL) -> list[list[str]]:
    nodes = gql("{ assetNodes { assetKey { path } groupName isPartitioned isMaterializable } }")["assetNodes"]
    return sorted(
        n["assetKey"]["path"]
        for n in nodes
        if n["groupName"] in LAYERS and n["isPartitioned"] and n["isMaterializable"]
    )


def _backfill(gql: GraphQL, keys: list[list[str]], title: str) -> list[dict[str, Any]]:
    """Launch a backfill of HOURS for ``keys`` the way the UI does, wait for it, return its runs (all succeeded)."""
    launched = gql(
        """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
            __typename ... on LaunchBackfillSuccess { backfillId }
            ... on PythonError { message } ... on InvalidSubsetError { message } } }""",
        # What the UI's "Launch backfill" sends for a range of partitions of the selected assets.
        params={
            "partitionsByAssets": [
                {"assetKey": {"path": k}, "partitions": {"range": {"start": HOURS[0], "end": HOURS[-1]}}} for k in keys
            ],
            "title": title,
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
        gql.fail(f"backfill {title} ({backfill_id}) still {status} at the deadline")
    runs = gql(
        """query($id: String!) { runsOrError(filter: {tags: [{key: "dagster/backfill", value: $id}]}) {
            ... on Runs { results { runId jobName status } } } }""",
        id=backfill_id,
    )["runsOrError"]["results"]
    if status not in ("COMPLETED", "COMPLETED_SUCCESS") or not runs or any(r["status"] != "SUCCESS" for r in runs):
        gql.fail(f"backfill {title} ended {status}; runs: {runs}")
    return runs


@pytest.mark.slow
def test_partition_range_backfill_through_graphql(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "state")
    generate(
        settings.landing_dir,
        GeneratorConfig(
            start=datetime(2026, 11, 1),
            hours=len(HOURS),
            seed=11,
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
            "AUTOMATION_DEFAULT_STATUS": "stopped",  # only the backfill writes; no sensor races it
            "PARTITIONS_START": settings.partitions_start,
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
        keys = _partitioned_asset_keys(gql)
        assert any(k[0] == "bronze" for k in keys) and any(k[0] == "marts" for k in keys), keys

        # Bronze first, then the dbt layer: one backfill of everything would start a dbt run each time some
        # hours finish ingesting (the backfill daemon requests what is ready), and those runs queue on DuckDB.
        bronze = [k for k in keys if k[0] == "bronze"]
        downstream = [k for k in keys if k[0] != "bronze"]
        ingest_runs = _backfill(gql, bronze, "e2e: bronze")
        dbt_runs = _backfill(gql, downstream, "e2e: dbt layer")
        assert len(ingest_runs) == 1, ingest_runs  # the 4 hours in one run (up to INGEST_MAX_HOURS_PER_RUN each)
        assert len(dbt_runs) == 1, dbt_runs  # the whole range in one run (BackfillPolicy.single_run)
        # The run's dbt step ran dbt through DbtCliResource: a dbt process of its own, in a target directory of
        # its own under the manifest's, where it left its run results.
        (run_target,) = (project_target(settings) / "runs").glob(f"{dbt_runs[0]['runId'][:8]}-*")
        assert (run_target / "run_results.json").exists()
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
