"""Fixtures shared by every test package: settings on a temp dir, a catalog, a landed hour, a Dagster instance,
a PostgreSQL database, a local webhook and a local S3 server with a bucket per test. Markers are registered in
pyproject.toml."""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from logistics_platform.lib.connections import load_catalog
from logistics_platform.settings import DBT_PROJECT_DIR, Settings, local_settings, subprocess_env
from tests.support.bronze import HOUR, contract_hour
from tests.support.http import Webhook
from tests.support.s3 import S3Server, moto_server

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "postgres"}

# `make test` runs the suite on TEST_WORKERS pytest-xdist workers (--dist loadgroup). A world built once per module or
# session is worth building once per run, so the tests that share one go to the same worker: by the fixture's name, to
# the group given here (shared across files) or to their module's group (None).
SHARED_WORLDS: dict[str, str | None] = {
    "dashboard_world": "dashboard_world",
    "embedded_run": "embedded_run",
    "built": None,
    "world": None,
    "world_settings": None,
    "landing": None,
    "landings": None,
    "hour_by_hour": None,
    "spark_python": None,
    "authenticating_s3": None,
}


# The dbt project targets (dbt_project/target/<target>-<database>-<digest>) there were before the session: the ones its
# settings add, a manifest and a folder per dbt run each (hundreds of MB over the suite), are removed at its end.
_TARGETS_BEFORE: set[Path] = set()


def _controller(session: pytest.Session) -> bool:
    return not hasattr(session.config, "workerinput")  # not a pytest-xdist worker


def pytest_sessionstart(session: pytest.Session) -> None:
    if _controller(session):
        _TARGETS_BEFORE.update((DBT_PROJECT_DIR / "target").glob("*"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _controller(session):
        for path in set((DBT_PROJECT_DIR / "target").glob("*")) - _TARGETS_BEFORE:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)


# First: pytest-xdist's own hook (loadgroup) reads the groups added here into the test ids it schedules by.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        names = getattr(item, "fixturenames", ())
        shared = [fixture for fixture in SHARED_WORLDS if fixture in names]
        if shared or item.get_closest_marker("jdk"):  # a real engine's module captures once for its tests
            group = (SHARED_WORLDS[shared[0]] if shared else None) or item.nodeid.split("::")[0]
            item.add_marker(pytest.mark.xdist_group(group))
    # Longest first: xdist hands out groups in collection order (`make test` passes --no-loadscope-reorder), so the
    # Spark modules (the longest by far) and the other end-to-end tests start at once instead of one of them being the
    # last thing a worker does while the others idle.
    items.sort(key=lambda item: 0 if item.get_closest_marker("spark") else 1 if item.get_closest_marker("slow") else 2)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings that keep landing zone, catalog, warehouse, DuckDB file and alerts log under the test's temp dir."""
    return local_settings(tmp_path)


# The variables that point the command line (which builds its settings from the environment) at a temp dir.
CLI_ENV_KEYS = ("LANDING_DIR", "ICEBERG_CATALOG_URI", "ICEBERG_WAREHOUSE", "DUCKDB_PATH")


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> Callable[[Settings], None]:
    """Call it with settings to make `logistics-platform` commands in this test use them (no Dagster home)."""

    def apply(settings: Settings) -> None:
        env = subprocess_env(settings)
        for key in CLI_ENV_KEYS:
            monkeypatch.setenv(key, env[key])
        monkeypatch.delenv("DAGSTER_HOME", raising=False)

    return apply


@pytest.fixture
def catalog(settings: Settings) -> SqlCatalog:
    """The SQLite catalog of ``settings``, with the bronze and marts namespaces."""
    return load_catalog(settings)


@dataclass
class LandedHour:
    hour: datetime
    # What the contract says each landed case becomes (see tests/support/bronze.contract_hour).
    expected: dict[str, dict[str, Any]]


@pytest.fixture
def landed_hour(settings: Settings) -> LandedHour:
    """One arrival hour of every topic in ``settings.landing_dir``, with every case of the landing contract."""
    return LandedHour(HOUR, contract_hour(settings.landing_dir, HOUR))


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """A throwaway Dagster instance (temp storage)."""
    with dg.instance_for_test() as inst:
        yield inst


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the local server for one test (SQLAlchemy URI), dropped afterwards."""
    import psycopg2

    name = f"logistics_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg2.connect(**PG, connect_timeout=5)
    except psycopg2.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable on 127.0.0.1:5432 ({exc}); `make test` starts it: run it that way")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'create database "{name}"')
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f'drop database if exists "{name}" with (force)')
        admin.close()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    """A webhook on 127.0.0.1 (a free port), served on a thread for the test's duration."""
    hook = Webhook(url="")

    class Recorder(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            hook.received.append(
                {"path": self.path, "content_type": self.headers["Content-Type"], "body": json.loads(body)}
            )
            self.send_response(hook.status)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Recorder)
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/alerts"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One moto S3 server process for the whole session (tests isolate by bucket), stopped at the end."""
    with moto_server() as server:
        yield server


@dataclass
class S3Warehouse:
    server: S3Server
    bucket: str
    # The variables that put a warehouse in the bucket (ICEBERG_WAREHOUSE, ICEBERG_S3_*).
    env: dict[str, str]


@pytest.fixture
def s3_warehouse(s3_server: S3Server) -> S3Warehouse:
    """A fresh bucket on the session's S3 server, and the settings' variables for a warehouse in it."""
    bucket = s3_server.create_bucket()
    return S3Warehouse(s3_server, bucket, s3_server.env(bucket))


@dataclass
class EmbeddedRun:
    """`run_pipeline` over a small generated landing zone in the embedded profile, with what it reported."""

    settings: Settings
    summary: Any  # pipeline.Summary
    log: list[str]
    progress: list[Any]  # pipeline.Progress, one per report


@pytest.fixture(scope="session")
def embedded_run(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedRun:
    """Three generated arrival hours through the whole pipeline in the embedded profile, once per session.

    Shared: the pipeline test checks the run itself, the prod-profile test compares its marts with these.
    """
    from logistics_platform.generator import GeneratorConfig, generate
    from logistics_platform.pipeline import run_pipeline

    settings = local_settings(tmp_path_factory.mktemp("embedded_run"))
    config = GeneratorConfig(start=datetime(2026, 11, 1), hours=3, seed=11, orders_per_day=400, pings_per_day=3000)
    generate(settings.landing_dir, config)
    log: list[str] = []
    progress: list[Any] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DAGSTER_HOME", raising=False)  # an ephemeral instance: nothing lands in the repo's storage
        summary = run_pipeline(settings, log=log.append, progress=progress.append)
    return EmbeddedRun(settings, summary, log, progress)
