"""ClickHouse's own engine (chdb, embedded) reads the dashboard world's published marts equal to DuckDB's reads.

The dashboard world publishes in three steps and has rows in every mart (late events, an SLA breach, a GPS jump), so
every mart's values are compared here, not only its columns (tests/support/clickhouse.py says how).
"""

from __future__ import annotations

import pytest

from logistics_platform.lib.transform.project import MART_MODELS
from tests.support.clickhouse import compare_published_marts, embedded_clickhouse, run_inside
from tests.support.dashboard_world import DashboardWorld


def test_clickhouse_reads_every_mart_of_the_dashboard_world_as_duckdb_does(
    dashboard_world: DashboardWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_inside(monkeypatch, dashboard_world.settings)
    with embedded_clickhouse() as clickhouse:
        counts = compare_published_marts(dashboard_world.settings, clickhouse)
    assert set(counts) == set(MART_MODELS)
    assert all(counts.values()), f"marts without rows compare only their columns: {counts}"
