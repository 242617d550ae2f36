"""The warm dbt worker: real dbt invocations served by a real worker process over its socket."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from pathlib import Path

import pytest

from logistics_platform.lib import connections as duck
from logistics_platform.lib.transform.dbt_inprocess import invoke_dbt
from logistics_platform.lib.transform.dbt_worker import (
    PROTOCOL,
    fingerprint,
    log_path,
    socket_path,
    stop_worker,
    worker_status,
)
from logistics_platform.lib.transform.project import DbtError
from logistics_platform.settings import DBT_PROJECT_DIR, Settings, load_settings, local_settings

pytestmark = pytest.mark.slow


def _worker_pids(settings: Settings) -> list[int]:
    return [int(p) for p in re.findall(r"\(pid (\d+),", log_path(settings.duckdb_path).read_text())]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_dead(pid: int, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _request(path: Path, message: dict) -> tuple[socket.socket, dict]:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(path))
    conn.sendall(json.dumps(message).encode() + b"\n")
    reply = conn.makefile("rb").readline()
    return conn, json.loads(reply)


@pytest.fixture
def worker_settings(tmp_path: Path):
    settings = local_settings(tmp_path, dbt_worker="auto", dbt_worker_idle_minutes=5)
    yield settings
    stop_worker(settings.duckdb_path)


def test_the_worker_serves_successive_invocations_like_dbt_in_process(
    worker_settings: Settings, tmp_path: Path
) -> None:
    settings = worker_settings
    events: list[dict] = []
    first = invoke_dbt(settings, ["seed"], target_path=tmp_path / "target", on_result=events.append)
    second = invoke_dbt(settings, ["seed"], target_path=tmp_path / "target")
    in_process = invoke_dbt(settings.with_overrides(dbt_worker="off"), ["seed"], target_path=tmp_path / "in-process")

    # One worker served both calls, and streamed the node's result event as dbt reported it.
    [pid] = _worker_pids(settings)
    assert _alive(pid) and log_path(settings.duckdb_path).read_text().count("done in") == 2
    status = worker_status(settings.duckdb_path)
    assert status is not None and (status["pid"], status["invocations"], status["current_code"]) == (pid, 2, True)
    assert [e["info"]["name"] for e in events] == ["LogSeedResult"]
    assert events[0]["data"]["node_info"]["unique_id"] == "seed.logistics.tier_pricing"
    for run in (first, second):
        assert run.ok
        assert [(r["unique_id"], r["status"]) for r in run.results] == [
            (r["unique_id"], r["status"]) for r in in_process.results
        ]
    # It parsed the project once (a `parse` before the first call) and ran both calls on that manifest.
    log = (tmp_path / "target" / "logs" / "dbt.log").read_text()
    assert re.findall(r"Command `cli (\w+)` succeeded", log) == ["parse", "seed", "seed"]
    assert log.count("Starting full parse") + log.count("Partial parsing enabled") == 1
    assert log_path(settings.duckdb_path).read_text().count("manifest reused") == 1
    # The worker closed the DuckDB file after each call: this process can open it and read what dbt built.
    con = duck.connect(settings.duckdb_path)
    try:
        assert con.sql("select count(*) from reference.tier_pricing").fetchone()[0] > 0  # type: ignore[index]
    finally:
        con.close()

    # A failing invocation fails the caller with dbt's message; the worker lives on.
    with pytest.raises(DbtError, match="no_such_table"):
        invoke_dbt(settings, ["show", "--inline", "select * from no_such_table"], target_path=tmp_path / "target")
    assert _worker_pids(settings) == [pid] and _alive(pid)

    assert stop_worker(settings.duckdb_path)
    assert _wait_dead(pid) and not socket_path(settings.duckdb_path).exists()
    assert worker_status(settings.duckdb_path) is None


def test_a_worker_running_other_code_exits_and_a_fresh_one_takes_over(
    worker_settings: Settings, tmp_path: Path
) -> None:
    settings = worker_settings
    invoke_dbt(settings, ["seed"], target_path=tmp_path / "target")
    [old] = _worker_pids(settings)

    conn, reply = _request(
        socket_path(settings.duckdb_path),
        {"protocol": PROTOCOL, "fingerprint": "another build", "args": ["seed"], "env": {}},
    )
    conn.close()
    assert reply == {"type": "stale"}
    assert _wait_dead(old)

    assert invoke_dbt(settings, ["seed"], target_path=tmp_path / "target").ok
    pids = _worker_pids(settings)
    assert len(pids) == 2 and pids[0] == old and _alive(pids[1])


def test_a_caller_that_goes_away_mid_invocation_stops_the_worker(worker_settings: Settings, tmp_path: Path) -> None:
    settings = worker_settings
    invoke_dbt(settings, ["seed"], target_path=tmp_path / "target")
    [pid] = _worker_pids(settings)
    env = {**os.environ, "DO_NOT_TRACK": "1", "DUCKDB_PATH": str(settings.duckdb_path)}
    slow_query = "select count(*) from range(20000000000)"  # runs for minutes unless stopped
    project = str(DBT_PROJECT_DIR)
    args = ["show", "--inline", slow_query, "--project-dir", project, "--profiles-dir", project]
    conn, reply = _request(
        socket_path(settings.duckdb_path),
        {"protocol": PROTOCOL, "fingerprint": fingerprint(), "args": args, "env": env},
    )
    assert reply == {"type": "accepted"}
    time.sleep(1.0)
    conn.close()  # the run was terminated
    assert _wait_dead(pid)

    # The next call starts a new worker, which opens the DuckDB file the killed one had open.
    assert invoke_dbt(settings, ["seed"], target_path=tmp_path / "target").ok
    assert len(_worker_pids(settings)) == 2


def test_the_worker_is_on_locally_and_off_in_prod_unless_configured() -> None:
    assert load_settings({}).dbt_worker == "auto"
    prod = {"LOGISTICS_ENV": "prod", "ICEBERG_CATALOG_URI": "postgresql+psycopg2://u@h/db"}
    assert load_settings(prod).dbt_worker == "off"
    assert load_settings({**prod, "DBT_WORKER": "auto"}).dbt_worker == "auto"
    assert load_settings({"DBT_WORKER": "off"}).dbt_worker == "off"
    with pytest.raises(ValueError, match="DBT_WORKER"):
        load_settings({"DBT_WORKER": "sometimes"})
