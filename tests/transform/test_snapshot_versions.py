"""Invariants 3 and 4 of marts.md for a platform started on a database with history: tenants known only from the
initial snapshot are valid from the start of history, also when their snapshot rows arrive hours after the
deliveries they price (the snapshot reads tables in name order, tenants last: a long one spans arrival hours)."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.transform.project import run_dbt, window_vars
from logistics_platform.settings import local_settings
from tests.support.bronze import cdc, dump, iso, order
from tests.support.transform_world import TOPIC_OF, World, write_landing

pytestmark = pytest.mark.slow
NO_TESTS = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]
SNAPSHOT_AT = datetime(2026, 11, 2, 2, 55)  # source.ts_ms of every snapshot row, after the deliveries it covers
SNAPSHOT_LSN = 1000
TIERS = {"t-001": "bronze", "t-002": "gold"}  # platform fee 15% and 10% (seed tier_pricing)


def _snapshot_world() -> World:
    """Orders delivered from 00:40 to 01:50, read by the snapshot at 02:55 that lands in the 02:00 hour; the tenants'
    snapshot rows land in the 04:00 hour, beyond the lookback hour of a run of that hour (dbt_project.yml): that run
    must recompute the older deliveries' revenue for the tenants' snapshot reads alone."""
    first, second = datetime(2026, 11, 2, 2), datetime(2026, 11, 2, 4)
    world = World(hours=[first, second])

    def snapshot_row(table: str, after: dict[str, object]) -> bytes:
        return dump(cdc("r", table, after, lsn=SNAPSHOT_LSN, ts=SNAPSHOT_AT))

    orders = []
    for i, (tenant, delivered) in enumerate([("t-001", "00:40"), ("t-002", "01:40"), ("t-001", "01:50")]):
        at = datetime.fromisoformat(f"2026-11-02 {delivered}")
        row = order(100 + i, at - timedelta(minutes=30), tenant_id=tenant, courier_id=1, status="delivered")
        orders.append(snapshot_row("orders", {**row, "delivered_at": iso(at), "updated_at": iso(at)}))
    world.lines[(TOPIC_OF["orders"], first)] = orders
    tenants = [
        snapshot_row("tenants", {"tenant_id": t, "name": t, "tier": tier, "region": "north", "updated_at": iso(first)})
        for t, tier in TIERS.items()
    ]
    world.lines[(TOPIC_OF["tenants"], second)] = tenants
    return world


@pytest.mark.parametrize("order_of_hours", [(0, 1), (1, 0)], ids=["tenants-after", "tenants-first"])
def test_snapshot_tenants_price_older_deliveries_incrementally_as_a_full_refresh(
    tmp_path: Path, order_of_hours: tuple[int, int]
) -> None:
    settings = local_settings(tmp_path / "incremental")
    world = _snapshot_world()
    write_landing(world, settings.landing_dir)
    for n, index in enumerate(order_of_hours):
        hour = world.hours[index]
        ingest_hour(settings, hour)
        # The first step builds the tables; the second is a real incremental run of its hour only.
        run_dbt(settings, ["build", *NO_TESTS], window=window_vars(hour, hour), target_path=tmp_path / f"t{n}")

    rebuilt = local_settings(tmp_path / "rebuilt")
    write_landing(world, rebuilt.landing_dir)
    for hour in world.hours:
        ingest_hour(rebuilt, hour)
    # Raises with the failing nodes if a model or a test fails: assert_tenant_version_at_delivery among the project's
    # own tests (the generic ones run on every mart elsewhere).
    full = ["build", "--full-refresh", "--exclude", "test_type:generic"]
    assert run_dbt(rebuilt, full, target_path=tmp_path / "full").ok

    query = "select tenant_id, valid_from, valid_to from marts.dim_tenant order by tenant_id"
    revenue = "select revenue_date, tenant_id, orders_delivered, platform_revenue from marts.fct_daily_revenue"
    results = []
    for path in (settings.duckdb_path, rebuilt.duckdb_path):
        con = duck.connect(path, read_only=True)
        try:
            results.append((con.sql(query).fetchall(), sorted(con.sql(revenue).fetchall())))
        finally:
            con.close()
    assert results[0] == results[1]
    versions, daily = results[1]
    # Independent of the models: each tenant's one version is valid since 1970 (the start of history), not from the
    # snapshot's 02:55, so the deliveries at 00:40..01:50 are priced at the snapshot's tier (15% of 129.90 twice for
    # t-001, 10% once for t-002), whichever hour the incremental runs saw first.
    assert versions == [(t, datetime(1970, 1, 1), None) for t in TIERS]
    day = datetime(2026, 11, 2).date()
    assert daily == [(day, "t-001", 2, Decimal("38.98")), (day, "t-002", 1, Decimal("12.99"))]
