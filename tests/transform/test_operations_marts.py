"""The operations marts (marts.md, "Operations marts") equal an independent computation from the landing files.

The world (tests/support/ops_world.py) holds a breach, overdue orders (one deleted and one cancelled while
overdue), an order delivered exactly at its promise, an anomalous day and GPS jumps, landed out of order, late and
redelivered; the expected rows come from tests/support/ops_oracle.py, plain Python over the landed lines.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.transform.project import run_dbt
from logistics_platform.settings import Settings, local_settings
from tests.support import ops_oracle
from tests.support.ops_world import build_ops_world
from tests.support.transform_world import write_landing

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = local_settings(tmp_path_factory.mktemp("ops_marts"))
    world = build_ops_world()
    write_landing(world, settings.landing_dir)
    for hour in world.hours:
        ingest_hour(settings, hour)
    # Every model, unit test and data test; raises on any error.
    run_dbt(settings, ["build"], target_path=settings.duckdb_path.parent / "dbt_target")
    return settings


def _rows(settings: Settings, query: str) -> list[tuple]:
    con = duck.connect(settings.duckdb_path, read_only=True)
    try:
        return con.sql(query).fetchall()
    finally:
        con.close()


def _close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9))


def test_region_sla_equals_the_landing_data(built: Settings) -> None:
    expected = ops_oracle.region_sla(ops_oracle.order_changes(built.landing_dir))
    actual = {
        (w, region): (n, late, share, overdue, breached)
        for w, region, n, late, share, overdue, breached in _rows(built, "select * from marts.fct_region_sla")
    }
    assert actual == expected
    # The cases the world is made of are in it.
    assert sum(v[4] for v in expected.values()) == 1, "exactly one breached window"
    assert any(v[3] > 0 for v in expected.values()) and any(v[1] > 0 and not v[4] for v in expected.values())


def test_region_delivery_daily_equals_the_landing_data(built: Settings) -> None:
    expected = ops_oracle.region_delivery_daily(ops_oracle.order_changes(built.landing_dir))
    rows = _rows(built, "select * from marts.fct_region_delivery_daily")
    assert {(r[0], r[1]) for r in rows} == set(expected)
    for day, region, n, avg, days, mean, stddev, anomaly in rows:
        want = expected[(day, region)]
        assert (n, days, anomaly) == (want[0], want[2], want[5]), (day, region)
        assert _close(avg, want[1]) and _close(mean, want[3]) and _close(stddev, want[4]), (day, region)
    assert [key for key, v in expected.items() if v[5]] == [(ops_oracle.date(2026, 11, 6), "south")]


def test_courier_gps_jumps_equal_the_landing_data(built: Settings) -> None:
    expected = ops_oracle.gps_jumps(ops_oracle.pings(built.landing_dir))
    rows = _rows(built, "select * from marts.fct_courier_gps_jumps")
    assert {r[1] for r in rows} == set(expected) and len(rows) == len(expected) > 0
    for courier, ping_id, previous, at, previous_at, km, kmh in rows:
        want = expected[ping_id]
        assert (courier, previous, at, previous_at) == want[:4]
        assert _close(km, want[4]) and _close(kmh, want[5])


def test_settings_reach_the_marts(built: Settings, tmp_path: Path) -> None:
    """Other SLA settings give the oracle's result for them: the values travel from Settings to dbt."""
    # On a copy of the database: the other tests keep the build with the defaults.
    copy = tmp_path / "analytics.duckdb"
    shutil.copyfile(built.duckdb_path, copy)
    settings = built.with_overrides(
        duckdb_path=copy, sla_window_minutes=15, sla_min_deliveries=2, sla_late_share_max=0.5, gps_jump_kmh=1300.0
    )
    target = tmp_path / "dbt_target"
    run_dbt(
        settings, ["run", "--full-refresh", "--select", "fct_region_sla", "fct_courier_gps_jumps"], target_path=target
    )
    changes = ops_oracle.order_changes(built.landing_dir)
    expected = ops_oracle.region_sla(changes, width_minutes=15, min_deliveries=2, late_share_max="0.5")
    actual = {(r[0], r[1]): r[2:] for r in _rows(settings, "select * from marts.fct_region_sla")}
    assert actual == expected and sum(v[4] for v in expected.values()) > 1
    jumps = ops_oracle.gps_jumps(ops_oracle.pings(built.landing_dir), limit_kmh=1300.0)
    assert {r[0] for r in _rows(settings, "select ping_id from marts.fct_courier_gps_jumps")} == set(jumps)
    assert 0 < len(jumps) < len(ops_oracle.gps_jumps(ops_oracle.pings(built.landing_dir)))
