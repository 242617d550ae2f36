"""Driving a real `dagster dev` (webserver + daemon) the way the UI does: its GraphQL API, backfills, a small world.

Used by the end-to-end tests of UI backfills. The waits are upper bounds (a test fails with the server's log when
one is exceeded), not measurements.
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
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.settings import PROJECT_ROOT, Settings, subprocess_env

STARTUP_DEADLINE_S = 300
BACKFILL_DEADLINE_S = 900
FINAL_STATUSES = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GraphQL:
    """Posts queries to the webserver's /graphql; a failure shows the tail of the server's log."""

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
        return dict(payload["data"])

    def fail(self, message: str) -> None:
        tail = self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""
        pytest.fail(f"{message}\n--- dagster dev log (tail) ---\n{tail}")


def land_small_world(settings: Settings, hours: int, seed: int) -> None:
    """A few generated arrival hours from 2026-11-01 00:00 in ``settings.landing_dir`` (small volumes)."""
    generate(
        settings.landing_dir,
        GeneratorConfig(
            start=datetime(2026, 11, 1),
            hours=hours,
            seed=seed,
            tenants=3,
            couriers=8,
            orders_per_day=240,
            pings_per_day=480,
            delayed_files=0,
        ),
    )


@contextlib.contextmanager
def dagster_dev(settings: Settings, tmp_path: Path, **env: str) -> Iterator[GraphQL]:
    """`dagster dev` on a free port with a fresh instance and these settings, automation stopped; yields its API.

    ``env`` adds variables (e.g. INGEST_MAX_HOURS_PER_RUN). The process group is ended afterwards.
    """
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_ROOT / "dagster.yaml", home / "dagster.yaml")
    variables = {
        **subprocess_env(settings),
        "DAGSTER_HOME": str(home),
        "ALERTS_LOG": str(settings.alerts_log),
        "AUTOMATION_DEFAULT_STATUS": "stopped",  # only the backfills write; no sensor races them
        "PARTITIONS_START": settings.partitions_start,
        **env,
    }
    port = free_port()
    log = tmp_path / "dagster_dev.log"
    dagster = Path(sys.executable).parent / "dagster"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(dagster), "dev", "-w", str(PROJECT_ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
            cwd=PROJECT_ROOT,
            env=variables,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    gql = GraphQL(port, log)
    try:
        _wait_until_loaded(gql, proc)
        yield gql
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


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


def asset_keys(gql: GraphQL, groups: tuple[str, ...], partitioned: bool = True) -> list[list[str]]:
    """The materializable assets of these groups, partitioned (or not), as key paths."""
    nodes = gql("{ assetNodes { assetKey { path } groupName isPartitioned isMaterializable } }")["assetNodes"]
    return sorted(
        n["assetKey"]["path"]
        for n in nodes
        if n["groupName"] in groups and n["isPartitioned"] == partitioned and n["isMaterializable"]
    )


def backfill(
    gql: GraphQL,
    keys: list[list[str]],
    first: str,
    last: str,
    title: str,
    unpartitioned: list[list[str]] | None = None,
) -> list[dict[str, Any]]:
    """Launch a backfill of partitions ``first`` .. ``last`` of ``keys`` (plus the ``unpartitioned`` assets, once) as
    the UI's "Launch backfill" does, wait for it, and return its runs (id, job, status, tags as a dict); fails unless
    it completed with every run a success."""
    launched = gql(
        """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
            __typename ... on LaunchBackfillSuccess { backfillId }
            ... on PythonError { message } ... on InvalidSubsetError { message } } }""",
        params={
            "partitionsByAssets": [
                *({"assetKey": {"path": k}, "partitions": {"range": {"start": first, "end": last}}} for k in keys),
                *({"assetKey": {"path": k}, "partitions": None} for k in unpartitioned or []),
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
            ... on Runs { results { runId jobName status tags { key value } } } } }""",
        id=backfill_id,
    )["runsOrError"]["results"]
    if status not in ("COMPLETED", "COMPLETED_SUCCESS") or not runs or any(r["status"] != "SUCCESS" for r in runs):
        gql.fail(f"backfill {title} ended {status}; runs: {runs}")
    return [{**r, "tags": {t["key"]: t["value"] for t in r["tags"]}} for r in runs]
