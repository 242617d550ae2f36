"""The dashboard tests' world: the operations world through ingest, dbt and publish, built once for the package.

The app reads its settings from the environment (like the command line): the `cli_env` fixture points it at a world.
"""

from __future__ import annotations

import pytest

from tests.support.dashboard_world import DashboardWorld, build_dashboard_world


@pytest.fixture(scope="session")
def dashboard_world(tmp_path_factory: pytest.TempPathFactory) -> DashboardWorld:
    """Published marts with a breach, an anomalous day, a tagged earlier state, quarantined lines and a backlog."""
    return build_dashboard_world(tmp_path_factory.mktemp("dashboard_world"))
