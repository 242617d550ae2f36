"""A real `dbt build` (models, unit tests, data tests) on a small generated world, then what builds on it:
the marts' contract, folding a window's late events back in, and publishing the marts to Iceberg."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest

from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.late import fold_window
from logistics_platform.lib.transform.project import MART_MODELS, run_dbt
from logistics_platform.lib.transform.publish import publish_marts
from logistics_platform.settings import Settings, local_settings
from tests.support.transform_world import build_world, write_landing

pytestmark = pytest.mark.slow

# marts.md: names, columns (in order) and types are a contract.
CONTRACT: dict[str, list[tuple[str, str]]] = {
    "fct_orders": [
        ("order_id", "BIGINT"), ("tenant_id", "VARCHAR"), ("courier_id", "BIGINT"), ("region", "VARCHAR"),
        ("status", "VARCHAR"), ("total_amount", "DECIMAL(12,2)"), ("delivery_fee", "DECIMAL(12,2)"),
        ("created_at", "TIMESTAMP"), ("promised_at", "TIMESTAMP"), ("delivered_at", "TIMESTAMP"),
        ("updated_at", "TIMESTAMP"), ("last_lsn", "BIGINT"),
    ],
    "dim_tenant": [
        ("tenant_id", "VARCHAR"), ("name", "VARCHAR"), ("tier", "VARCHAR"), ("region", "VARCHAR"),
        ("valid_from", "TIMESTAMP"), ("valid_to", "TIMESTAMP"), ("is_current", "BOOLEAN"),
    ],
    "dim_courier": [
        ("courier_id", "BIGINT"), ("name", "VARCHAR"), ("region", "VARCHAR"), ("vehicle", "VARCHAR"),
        ("active", "BOOLEAN"),
    ],
    "fct_deliveries": [
        ("order_id", "BIGINT"), ("tenant_id", "VARCHAR"), ("courier_id", "BIGINT"), ("region", "VARCHAR"),
        ("created_at", "TIMESTAMP"), ("promised_at", "TIMESTAMP"), ("delivered_at", "TIMESTAMP"),
        ("delivery_minutes", "DOUBLE"), ("minutes_late", "DOUBLE"), ("is_on_time", "BOOLEAN"),
    ],
    "fct_daily_revenue": [
        ("revenue_date", "DATE"), ("tenant_id", "VARCHAR"), ("orders_delivered", "BIGINT"),
        ("gross_revenue", "DECIMAL(12,2)"), ("courier_revenue", "DECIMAL(12,2)"),
        ("platform_revenue", "DECIMAL(12,2)"), ("tenant_revenue", "DECIMAL(12,2)"),
    ],
    "fct_hourly_region_orders": [
        ("window_start", "TIMESTAMP"), ("region", "VARCHAR"), ("orders_created", "BIGINT"),
        ("orders_delivered", "BIGINT"), ("orders_cancelled", "BIGINT"),
    ],
    "fct_courier_hourly_activity": [
        ("window_start", "TIMESTAMP"), ("courier_id", "BIGINT"), ("pings", "BIGINT"),
        ("first_ping_at", "TIMESTAMP"), ("last_ping_at", "TIMESTAMP"),
    ],
    "late_events": [
        ("topic", "VARCHAR"), ("event_id", "VARCHAR"), ("event_key", "VARCHAR"), ("lsn", "BIGINT"),
        ("op", "VARCHAR"), ("event_time", "TIMESTAMP"), ("arrival_hour", "TIMESTAMP"),
        ("lateness_seconds", "BIGINT"), ("window_start", "TIMESTAMP"), ("window_mart", "VARCHAR"),
        ("reason", "VARCHAR"),
    ],
    "fct_region_sla": [
        ("window_start", "TIMESTAMP"), ("region", "VARCHAR"), ("deliveries", "BIGINT"),
        ("late_deliveries", "BIGINT"), ("late_share", "DECIMAL(5,4)"), ("overdue_open", "BIGINT"),
        ("breached", "BOOLEAN"),
    ],
    "fct_region_delivery_daily": [
        ("delivery_date", "DATE"), ("region", "VARCHAR"), ("deliveries", "BIGINT"),
        ("avg_delivery_minutes", "DOUBLE"), ("baseline_days", "INTEGER"), ("baseline_avg_minutes", "DOUBLE"),
        ("baseline_stddev_minutes", "DOUBLE"), ("is_anomaly", "BOOLEAN"),
    ],
    "fct_courier_gps_jumps": [
        ("courier_id", "BIGINT"), ("ping_id", "VARCHAR"), ("previous_ping_id", "VARCHAR"),
        ("recorded_at", "TIMESTAMP"), ("previous_recorded_at", "TIMESTAMP"), ("distance_km", "DOUBLE"),
        ("implied_kmh", "DOUBLE"),
    ],
    "fct_courier_off_route": [
        ("courier_id", "BIGINT"), ("order_id", "BIGINT"), ("started_at", "TIMESTAMP"), ("ended_at", "TIMESTAMP"),
        ("minutes", "DOUBLE"), ("pings", "BIGINT"), ("max_distance_km", "DOUBLE"), ("region", "VARCHAR"),
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, str]:
    """A world of 5 arrival hours, ingested into bronze and built with `dbt build` (every test included)."""
    settings = local_settings(tmp_path_factory.mktemp("dbt_build"))
    world = build_world(hours=5, orders_per_hour=10, seed=23)
    write_landing(world, settings.landing_dir)
    for hour in world.hours:
        ingest_hour(settings, hour)
    run = run_dbt(settings, ["build"], check=False, target_path=settings.duckdb_path.parent / "dbt_target")
    return settings, run.output


def _sql(settings: Settings, query: str, params: list | None = None) -> list[tuple]:
    con = duck.connect(settings.duckdb_path, read_only=True)
    try:
        return con.execute(query, params or []).fetchall()
    finally:
        con.close()


def test_dbt_build_passes_and_reports_payment_mismatches(built: tuple[Settings, str]) -> None:
    settings, output = built
    assert "ERROR=0" in output, output[-4000:]
    # The world has mismatched payments: invariant 5 reports them as a warning, it does not fail the build.
    assert "WARN" in output and "assert_payments_reconcile" in output
    for unit_test in (
        "update_landing_before_its_insert_keeps_the_update",
        "delete_landing_before_an_older_update_stays_deleted",
        "redelivered_duplicate_is_one_event_on_time_if_any_copy_is",
        "tier_valid_at_delivery_prices_the_order",
        "noop_tenant_update_opens_no_scd2_version",
        "snapshot_read_first_version_is_valid_from_the_start_of_history",
        "late_event_does_not_change_its_window",
    ):
        assert unit_test in output, f"unit test {unit_test} did not run"
    # The tier change of t-001 and the no-op update of t-002 in the world: 2 versions and 1 version.
    versions = dict(_sql(settings, "select tenant_id, count(*) from marts.dim_tenant group by 1"))
    assert versions["t-001"] == 2 and versions["t-002"] == 1


def test_marts_have_exactly_the_contract_columns(built: tuple[Settings, str]) -> None:
    settings, _ = built
    for mart, columns in CONTRACT.items():
        actual = _sql(
            settings,
            "select column_name, data_type from information_schema.columns "
            "where table_schema = 'marts' and table_name = ? order by ordinal_position",
            [mart],
        )
        assert actual == columns, f"marts.{mart}: {actual}"
    tables = {
        r[0] for r in _sql(settings, "select table_name from information_schema.tables where table_schema='marts'")
    }
    assert tables == set(MART_MODELS)


def test_publish_rewrites_only_changed_partitions(built: tuple[Settings, str]) -> None:
    settings, _ = built
    catalog = load_catalog(settings)
    con = duck.connect(settings.duckdb_path)
    try:
        first = publish_marts(catalog, con)
        # The first publish writes every partition (the day of created_at).
        assert first["fct_orders"].partitions_rewritten and first["fct_orders"].partitions_total == len(
            first["fct_orders"].partitions_rewritten
        )
        table = catalog.load_table("marts.fct_orders")

        def files_by_day() -> dict[int, set[str]]:
            out: dict[int, set[str]] = {}
            for task in catalog.load_table("marts.fct_orders").scan().plan_files():
                out.setdefault(task.file.partition[0], set()).add(task.file.file_path)
            return out

        before = files_by_day()
        assert table.scan().to_arrow().num_rows == con.sql("select count(*) from marts.fct_orders").fetchone()[0]
        # One order changes (as a dbt run would change it): only its day may be rewritten.
        order_id, day = con.sql(
            "select order_id, cast(created_at as date) from marts.fct_orders order by order_id limit 1"
        ).fetchone()
        con.execute("update marts.fct_orders set region = 'relocated' where order_id = ?", [order_id])
        second = publish_marts(catalog, con, marts=["fct_orders"])
        after = files_by_day()
        assert second["fct_orders"].partitions_rewritten == [day.isoformat()]
        changed = (day - date(1970, 1, 1)).days
        for partition, paths in before.items():
            if partition == changed:
                assert after[partition] != paths
            else:
                assert after[partition] == paths, f"unchanged day {partition} was rewritten"
        published = catalog.load_table("marts.fct_orders").scan(row_filter=f"order_id = {order_id}").to_arrow()
        assert published.column("region").to_pylist() == ["relocated"]
        # Nothing changed: nothing is rewritten.
        assert publish_marts(catalog, con, marts=["fct_orders"])["fct_orders"].partitions_rewritten == []
        for mart in MART_MODELS:
            served = catalog.load_table(f"marts.{mart}").scan().to_arrow().num_rows
            assert served == con.sql(f"select count(*) from marts.{mart}").fetchone()[0], mart
    finally:
        con.close()


def test_fold_brings_a_windows_late_events_back(built: tuple[Settings, str]) -> None:
    settings, _ = built
    window = _sql(
        settings,
        "select window_start, count(*) from marts.late_events where topic = 'logistics.tracking_pings' "
        "group by 1 order by 2 desc, 1 limit 1",
    )
    assert window, "the world has no late pings"
    start, late = window[0]
    pings_before = _sql(
        settings,
        "select coalesce(sum(pings), 0) from marts.fct_courier_hourly_activity where window_start = ?",
        [start],
    )[0][0]

    result = fold_window(settings, "tracking_pings", start)

    assert result.newly_recorded and result.late_events_before == late and result.late_events_after == 0
    pings_after = _sql(
        settings,
        "select coalesce(sum(pings), 0) from marts.fct_courier_hourly_activity where window_start = ?",
        [start],
    )[0][0]
    assert pings_after == pings_before + late
    # Other windows keep their late events.
    others = _sql(settings, "select count(*) from marts.late_events where window_start != ?", [start])[0][0]
    assert others > 0
    # A full refresh honours the fold too (incremental = full rebuild holds with folds).
    rebuilt = settings.with_overrides(duckdb_path=Path(str(settings.duckdb_path).replace(".duckdb", "_full.duckdb")))
    con = duck.connect(rebuilt.duckdb_path)
    con.execute(f"attach '{settings.duckdb_path}' as live (read_only)")
    con.execute("create schema ops")
    con.execute("create table ops.folded_windows as select * from live.ops.folded_windows")
    con.close()
    run_dbt(
        rebuilt, ["build", "--full-refresh", "--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]
    )
    full_pings = _sql(
        rebuilt, "select coalesce(sum(pings), 0) from marts.fct_courier_hourly_activity where window_start = ?", [start]
    )[0][0]
    assert full_pings == pings_after


def test_columns_not_null_fails_naming_each_column_that_holds_nulls(
    built: tuple[Settings, str], tmp_path: Path
) -> None:
    """One test a model checks its required columns: nulls in two of them fail it, and its failing rows name both."""
    settings, _ = built
    copy = settings.with_overrides(duckdb_path=tmp_path / "copy.duckdb")
    shutil.copyfile(settings.duckdb_path, copy.duckdb_path)
    con = duck.connect(copy.duckdb_path)
    try:
        con.execute(
            "update intermediate.int_orders_current set last_lsn = null, is_deleted = null "
            "where order_id = (select min(order_id) from intermediate.int_orders_current)"
        )
    finally:
        con.close()
    selection = ["--select", "int_orders_current,test_name:columns_not_null"]
    run = run_dbt(copy, ["test", *selection], check=False, target_path=tmp_path / "target")
    tests = [r for r in run.results if r["unique_id"].startswith("test.")]
    assert [r["status"] for r in tests] == ["fail"], run.output[-2000:]
    assert tests[0]["failures"] == 2  # one row per column holding nulls: last_lsn and is_deleted
    con = duck.connect(copy.duckdb_path)
    try:
        con.execute(
            "update intermediate.int_orders_current set last_lsn = 1, is_deleted = false where last_lsn is null"
        )
    finally:
        con.close()
    run = run_dbt(copy, ["test", *selection], check=False, target_path=tmp_path / "target")
    assert [r["status"] for r in run.results if r["unique_id"].startswith("test.")] == ["pass"], run.output[-2000:]
