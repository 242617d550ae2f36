"""The publish of one new hour on a real world of four days (ingested, built with dbt, published): only the day
partitions the hour changed get new files, the published marts equal a full refresh, and a daily tag still reads
the day as it was."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog

from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.dashboard.travel import tag_snapshot
from logistics_platform.lib.maintenance.tags import apply_daily_tags, tag_name
from logistics_platform.lib.transform.project import MART_MODELS, run_dbt
from logistics_platform.lib.transform.publish import PARTITION_COLUMNS, partition_label, publish_marts
from logistics_platform.settings import local_settings
from tests.support.mart_equality import compare_marts
from tests.support.transform_world import build_world, write_landing

pytestmark = pytest.mark.slow

START = datetime(2026, 10, 31, 20)
HOURS = 53  # 2026-10-31 20:00 to 2026-11-03 00:00: the last hour opens a fourth day


def _files(catalog: Catalog, mart: str) -> dict[str, str]:
    """Path -> partition label of every data file main serves."""
    table = catalog.load_table(f"marts.{mart}")
    column = PARTITION_COLUMNS.get(mart)
    return {
        task.file.file_path: partition_label(task.file.partition[0] if column else 0, column)
        for task in table.scan().plan_files()
    }


def test_one_new_hour_rewrites_only_its_partitions_and_the_marts_equal_a_full_refresh(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    world = build_world(hours=HOURS, orders_per_hour=2, seed=11, start=START)
    write_landing(world, settings.landing_dir)
    for hour in world.hours[:-1]:
        ingest_hour(settings, hour)
    run_dbt(settings, ["seed"])
    run_dbt(settings, ["run"])
    catalog = load_catalog(settings)
    con = duck.connect(settings.duckdb_path)
    try:
        publish_marts(catalog, con)
    finally:
        con.close()
    before = {mart: _files(catalog, mart) for mart in MART_MODELS}
    orders = catalog.load_table("marts.fct_orders")
    first_rows = orders.scan().to_arrow().sort_by("order_id")
    # Today's day-end tag, as the nightly maintenance would set it tomorrow.
    today = datetime.now(UTC).date()
    apply_daily_tags(orders, now=datetime.now(UTC) + timedelta(days=1), retention_days=30)

    ingest_hour(settings, world.hours[-1])
    run_dbt(settings, ["run", "--full-refresh"])
    con = duck.connect(settings.duckdb_path)
    try:
        reports = publish_marts(catalog, con)
    finally:
        con.close()

    for mart in PARTITION_COLUMNS:
        report = reports[mart]
        added = {path: day for path, day in _files(catalog, mart).items() if path not in before[mart]}
        assert set(added.values()) <= set(report.partitions_rewritten), mart
        if report.partitions_total >= 3:
            assert len(added) < report.partitions_total, f"{mart}: {sorted(added.values())}"
    order_report = reports["fct_orders"]
    assert order_report.partitions_total == 4 and order_report.audit == "passed"
    added_orders = [p for p in _files(catalog, "fct_orders") if p not in before["fct_orders"]]
    assert 0 < len(added_orders) <= 2  # the new day, and the day before for orders updated in the new hour
    assert "2026-10-31" not in order_report.partitions_rewritten
    assert set(_files(catalog, "fct_orders").values()) == {
        (date(2026, 10, 31) + timedelta(days=d)).isoformat() for d in range(4)
    }

    # Every mart main serves equals the marts dbt rebuilt from scratch (rows, columns and types).
    compare_marts(settings, settings.duckdb_path)
    # Time travel: the day-end tag still reads the first publish.
    orders = catalog.load_table("marts.fct_orders")
    tagged = tag_snapshot(orders, tag_name(today))
    assert tagged is not None
    assert orders.scan(snapshot_id=tagged).to_arrow().sort_by("order_id").equals(first_rows)
