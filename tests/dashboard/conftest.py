"""The dashboard tests' world: the operations world through ingest, dbt and publish, built once for the package.

The app reads its settings from the environment (like the command line): the `cli_env` fixture points it at a world.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from streamlit import config

from logistics_platform.dashboard import RUNNER_OPTIONS
from tests.support.dashboard_world import DashboardWorld, build_dashboard_world


@pytest.fixture(scope="session")
def dashboard_world(tmp_path_factory: pytest.TempPathFactory) -> DashboardWorld:
    """Published marts with a breach, an anomalous day, a tagged earlier state, quarantined lines and a backlog."""
    return build_dashboard_world(tmp_path_factory.mktemp("dashboard_world"))


@pytest.fixture(scope="session", autouse=True)
def _runner_options() -> None:
    """AppTest runs the pages with the options the `dashboard` command serves them with."""
    for key, value in RUNNER_OPTIONS.items():
        config.set_option(key, value)


@pytest.fixture(autouse=True)
def _main_module_restored() -> Iterator[None]:
    """Streamlit's AppTest runs each page as ``__main__`` and leaves it in ``sys.modules``: a later test of the same
    process that spawns workers (multiprocessing re-imports ``__main__`` in the child) would run a dashboard page."""
    main = sys.modules["__main__"]
    try:
        yield
    finally:
        sys.modules["__main__"] = main
