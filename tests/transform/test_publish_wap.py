"""Write-audit-publish of the marts: a real SQLite catalog, real Iceberg files, real DuckDB marts (built here with
the contract's columns, so that an audit failure can be injected), read back by pyiceberg and DuckDB iceberg_scan."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform

from logistics_platform.lib import connections as duck
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.audit import (
    ROW_DROP_MIN_ROWS,
    check_duckdb_contract,
    check_row_count,
    iceberg_type,
    load_contract,
)
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.lib.transform.publish import (
    AUDIT_BRANCH,
    AUDIT_FAILURES_PROPERTY,
    AUDIT_PROPERTY,
    AUDITED_SNAPSHOT_PROPERTY,
    FINGERPRINT_PROPERTY,
    LEGACY_FINGERPRINT_PROPERTY,
    AuditFailed,
    MainMoved,
    fast_forward_main,
    publish_marts,
    write_audit_snapshot,
)
from logistics_platform.settings import load_settings, local_settings
from tests.support.marts import ORDERS, build_marts, keep_orders


@pytest.fixture()
def world(tmp_path: Path) -> Iterator[tuple[Catalog, duckdb.DuckDBPyConnection]]:
    settings = local_settings(tmp_path)
    con = duck.connect(settings.duckdb_path)
    try:
        yield load_catalog(settings), con
    finally:
        con.close()


def _main_state(catalog: Catalog) -> dict[str, tuple[int | None, int, int]]:
    """Mart -> (main's snapshot id, rows pyiceberg reads from main, rows DuckDB iceberg_scan reads)."""
    reader = duck.connect()
    try:
        out = {}
        for mart in MART_MODELS:
            table = catalog.load_table(f"marts.{mart}")
            row = reader.sql(f"select count(*) from iceberg_scan('{table.metadata_location}')").fetchone()
            out[mart] = (table.metadata.current_snapshot_id, table.scan().to_arrow().num_rows, row[0] if row else -1)
        return out
    finally:
        reader.close()


def _branch_head(table: Table) -> int | None:
    ref = table.metadata.refs.get(AUDIT_BRANCH)
    return ref.snapshot_id if ref else None


def _count(con: duckdb.DuckDBPyConnection, mart: str) -> int:
    row = con.sql(f"select count(*) from marts.{mart}").fetchone()
    return int(row[0]) if row else 0


def test_passing_publish_fast_forwards_main_to_a_snapshot_marked_passed(
    world: tuple[Catalog, duckdb.DuckDBPyConnection],
) -> None:
    catalog, con = world
    build_marts(con)
    reports = publish_marts(catalog, con)
    assert {r.audit for r in reports.values()} == {"passed"}
    for mart, (snapshot_id, pyiceberg_rows, duckdb_rows) in _main_state(catalog).items():
        table = catalog.load_table(f"marts.{mart}")
        head = table.current_snapshot()
        assert head is not None and head.snapshot_id == snapshot_id == reports[mart].snapshot_id
        assert head.summary is not None and head.summary[AUDIT_PROPERTY] == "passed"
        # main moved by a fast-forward: its head's parent is the snapshot the audit read.
        assert head.parent_snapshot_id == reports[mart].audited_snapshot_id
        assert head.summary[AUDITED_SNAPSHOT_PROPERTY] == str(reports[mart].audited_snapshot_id)
        assert pyiceberg_rows == duckdb_rows == _count(con, mart)
        assert head.summary["total-records"] == str(_count(con, mart))  # what the matches_duckdb check reads
        assert AUDIT_BRANCH not in table.metadata.refs  # a passed audit's branch is dropped
    orders = catalog.load_table("marts.fct_orders").scan().to_arrow()
    assert orders.num_rows == ORDERS and len(set(orders.column("order_id").to_pylist())) == ORDERS


def test_duplicate_key_fails_the_audit_main_unchanged_branch_kept_and_the_fix_publishes(
    world: tuple[Catalog, duckdb.DuckDBPyConnection],
) -> None:
    catalog, con = world
    build_marts(con)
    publish_marts(catalog, con)
    before = _main_state(catalog)

    # A contract violation: courier 1 twice in a current-state mart, and every other mart changed too.
    con.execute("insert into marts.dim_courier select * from marts.dim_courier where courier_id = 1")
    con.execute("update marts.fct_orders set region = 'moved' where order_id = 7")
    con.execute("delete from marts.fct_hourly_region_orders where window_start = (select min(window_start) from "
                "marts.fct_hourly_region_orders)")  # fmt: skip
    with pytest.raises(AuditFailed) as failed:
        publish_marts(catalog, con)
    message = str(failed.value)
    assert "marts.dim_courier (branch audit, snapshot" in message and "keys:" in message and "(1)" in message
    assert "\n" not in message
    reports = failed.value.reports
    assert reports["dim_courier"].audit == "failed"
    changed = ("fct_orders", "fct_hourly_region_orders")
    assert {reports[m].audit for m in changed} == {"held"}  # passed, but main waits for every mart
    assert {reports[m].audit for m in MART_MODELS if m not in (*changed, "dim_courier")} == {"unchanged"}

    # Readers of main, pyiceberg and DuckDB alike, see exactly the previous publish.
    assert _main_state(catalog) == before
    order_7 = catalog.load_table("marts.fct_orders").scan(row_filter="order_id = 7").to_arrow()
    assert order_7.column("region").to_pylist() == ["r-1"]

    # The branch is kept for inspection: its head says why, its parent holds the rows that failed.
    couriers = catalog.load_table("marts.dim_courier")
    head = couriers.metadata.snapshot_by_id(_branch_head(couriers) or -1)
    assert head is not None and head.summary is not None
    assert head.summary[AUDIT_PROPERTY] == "failed" and "keys:" in head.summary[AUDIT_FAILURES_PROPERTY]
    audited = int(head.summary[AUDITED_SNAPSHOT_PROPERTY])
    assert audited == reports["dim_courier"].audited_snapshot_id == head.parent_snapshot_id
    assert couriers.scan(snapshot_id=audited).to_arrow().num_rows == 6
    assert couriers.scan().use_ref(AUDIT_BRANCH).to_arrow().num_rows == 6
    reader = duck.connect()
    try:
        served = reader.sql(f"select count(*) from iceberg_scan('{couriers.metadata_location}')").fetchone()
        assert served == (5,)
    finally:
        reader.close()

    # Fixed: the next publish re-creates the branch from main, passes and fast-forwards every mart.
    con.execute("delete from marts.dim_courier where rowid = (select max(rowid) from marts.dim_courier)")
    fixed = publish_marts(catalog, con)
    assert {fixed[m].audit for m in changed} == {"passed"}
    # dim_courier is back to what main serves: nothing to write, and its failed branch is dropped.
    assert {fixed[m].audit for m in MART_MODELS if m not in changed} == {"unchanged"}
    assert fixed["fct_orders"].partitions_rewritten == ["2026-11-01"]
    after = _main_state(catalog)
    for mart in MART_MODELS:
        assert (after[mart][0] != before[mart][0]) == (mart in changed)
        assert after[mart][1] == after[mart][2] == _count(con, mart)
        table = catalog.load_table(f"marts.{mart}")
        snap = table.current_snapshot()
        assert snap is not None and snap.summary is not None and snap.summary[AUDIT_PROPERTY] == "passed"
        assert AUDIT_BRANCH not in table.metadata.refs
    order_7 = catalog.load_table("marts.fct_orders").scan(row_filter="order_id = 7").to_arrow()
    assert order_7.column("region").to_pylist() == ["moved"]


def test_wrong_type_in_the_duckdb_mart_fails_before_anything_is_written(
    world: tuple[Catalog, duckdb.DuckDBPyConnection],
) -> None:
    catalog, con = world
    build_marts(con)
    publish_marts(catalog, con)
    before = _main_state(catalog)
    con.execute("alter table marts.fct_deliveries alter delivery_minutes type varchar")
    with pytest.raises(AuditFailed) as failed:
        publish_marts(catalog, con)
    assert "marts.fct_deliveries (not written)" in str(failed.value)
    assert "fct_deliveries.delivery_minutes is varchar in DuckDB, the dbt contract says double" in str(failed.value)
    assert _main_state(catalog) == before


def test_revenue_that_does_not_reconcile_fails_the_audit(world: tuple[Catalog, duckdb.DuckDBPyConnection]) -> None:
    catalog, con = world
    build_marts(con)
    publish_marts(catalog, con)
    before = _main_state(catalog)
    con.execute(
        "update marts.fct_daily_revenue set gross_revenue = gross_revenue + 1, tenant_revenue = tenant_revenue + 1 "
        "where tenant_id = 't-1'"
    )
    with pytest.raises(AuditFailed) as failed:
        publish_marts(catalog, con, marts=["fct_daily_revenue"])
    assert "marts.fct_daily_revenue" in str(failed.value) and "disagree with fct_deliveries" in str(failed.value)
    assert _main_state(catalog) == before
    # A subset publish reconciles against main's other marts: orders alone, unchanged, still pass.
    assert publish_marts(catalog, con, marts=["fct_orders"])["fct_orders"].audit == "unchanged"


def test_a_drop_beyond_the_bound_fails_and_a_higher_bound_publishes(
    world: tuple[Catalog, duckdb.DuckDBPyConnection],
) -> None:
    catalog, con = world
    build_marts(con)
    publish_marts(catalog, con)
    before = _main_state(catalog)
    keep_orders(con, 60)
    with pytest.raises(AuditFailed) as failed:
        publish_marts(catalog, con)
    assert f"fct_orders would drop from {ORDERS} to 60 rows on main" in str(failed.value)
    assert _main_state(catalog) == before
    assert "re-run the publish with PUBLISH_MAX_ROW_DROP=1" in str(failed.value)
    max_row_drop = load_settings({"PUBLISH_MAX_ROW_DROP": "1"}).publish_max_row_drop
    assert max_row_drop == 1.0 and load_settings({"PUBLISH_MAX_ROW_DROP": "7"}).publish_max_row_drop == 1.0
    published = publish_marts(catalog, con, max_row_drop=max_row_drop)["fct_orders"]
    assert published.audit == "passed" and published.rows == 60
    assert catalog.load_table("marts.fct_orders").scan().to_arrow().num_rows == 60


def test_empty_marts_publish(world: tuple[Catalog, duckdb.DuckDBPyConnection]) -> None:
    catalog, con = world
    # The first publish after a failed ingest: every mart exists in DuckDB but holds no rows.
    build_marts(con, empty=True)
    reports = publish_marts(catalog, con)
    assert {r.audit for r in reports.values()} == {"passed"}
    assert {state[1:] for state in _main_state(catalog).values()} == {(0, 0)}
    # Rows arrive, then the orders mart empties again (below the drop bound's minimum on main it may).
    build_marts(con)
    keep_orders(con, ROW_DROP_MIN_ROWS // 2)
    assert {r.audit for r in publish_marts(catalog, con).values()} == {"passed"}
    con.execute("delete from marts.fct_orders")
    con.execute("delete from marts.fct_deliveries")
    con.execute("delete from marts.fct_daily_revenue")
    reports = publish_marts(catalog, con, marts=["fct_orders", "fct_deliveries", "fct_daily_revenue"])
    assert reports["fct_orders"].audit == "passed" and reports["fct_orders"].partitions_total == 0
    assert reports["fct_orders"].partitions_rewritten == ["2026-11-01"]  # its files deleted, none written
    assert catalog.load_table("marts.fct_orders").scan().to_arrow().num_rows == 0


def test_fast_forward_refuses_when_main_moved_during_the_audit(
    world: tuple[Catalog, duckdb.DuckDBPyConnection],
) -> None:
    catalog, con = world
    build_marts(con)
    publish_marts(catalog, con)
    table = catalog.load_table("marts.dim_courier")
    base = table.metadata.current_snapshot_id
    rows = con.sql("select * from marts.dim_courier").to_arrow_table()
    write_audit_snapshot(table, rows, [task.file for task in table.scan().plan_files()], {})
    assert table.metadata.current_snapshot_id == base  # a branch commit leaves main alone
    concurrent = catalog.load_table("marts.dim_courier")
    concurrent.append(rows.slice(0, 1).cast(concurrent.schema().as_arrow()))
    with pytest.raises(MainMoved, match=r"main of marts\.dim_courier moved from snapshot"):
        fast_forward_main(table, base)
    table.refresh()
    assert table.metadata.current_snapshot_id == concurrent.metadata.current_snapshot_id
    assert table.scan().to_arrow().num_rows == 6  # the concurrent append was not discarded


def test_a_table_of_the_bucket_layout_migrates_to_days_in_one_full_rewrite(
    world: tuple[Catalog, duckdb.DuckDBPyConnection],
) -> None:
    catalog, con = world
    build_marts(con)
    # marts.fct_orders as the earlier publish left it: bucket(16, order_id), fingerprints in the old property.
    rows = con.sql("select * from marts.fct_orders").to_arrow_table()
    catalog.create_namespace_if_not_exists("marts")
    table = catalog.create_table("marts.fct_orders", schema=rows.schema)
    with table.update_spec() as update:
        update.add_field("order_id", BucketTransform(16), "order_id_bucket")
    with table.transaction() as tx:
        tx.set_properties({LEGACY_FINGERPRINT_PROPERTY: "{}"})
    table.append(rows.cast(table.schema().as_arrow()))
    old_snapshot = table.metadata.current_snapshot_id
    old_files = {task.file.file_path for task in table.scan().plan_files()}
    assert len(old_files) > 1

    report = publish_marts(catalog, con, marts=["fct_orders"])["fct_orders"]
    assert report.audit == "passed" and report.partitions_rewritten == ["2026-11-01"]
    table = catalog.load_table("marts.fct_orders")
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("created_at_day", "day")]
    files = [task.file for task in table.scan().plan_files()]
    assert {f.spec_id for f in files} == {table.spec().spec_id} and not old_files & {f.file_path for f in files}
    assert LEGACY_FINGERPRINT_PROPERTY not in table.properties and FINGERPRINT_PROPERTY in table.properties
    assert table.scan().to_arrow().num_rows == ORDERS
    # The snapshot of the old layout still reads as it did (time travel), and the next publish has nothing to do.
    assert table.scan(snapshot_id=old_snapshot).to_arrow().num_rows == ORDERS
    assert publish_marts(catalog, con, marts=["fct_orders"])["fct_orders"].audit == "unchanged"


def test_a_key_in_two_partitions_fails_the_audit(world: tuple[Catalog, duckdb.DuckDBPyConnection]) -> None:
    catalog, con = world
    build_marts(con)
    publish_marts(catalog, con)
    before = _main_state(catalog)
    # Order 7 again, created a day later: its new day is rewritten, its old one is not (unchanged), so the key
    # would be served twice.
    con.execute(
        "insert into marts.fct_orders select * replace (created_at + interval 1 day as created_at) "
        "from marts.fct_orders where order_id = 7"
    )
    with pytest.raises(AuditFailed) as failed:
        publish_marts(catalog, con, marts=["fct_orders"])
    assert "are both in a rewritten partition and in one this publish kept" in str(failed.value)
    assert failed.value.reports["fct_orders"].partitions_rewritten == ["2026-11-02"]
    assert _main_state(catalog) == before


def test_contract_helpers() -> None:
    assert iceberg_type("decimal(12,2)") == "decimal(12, 2)" and iceberg_type("BIGINT") == "long"
    with pytest.raises(ValueError, match="has no Iceberg mapping"):
        iceberg_type("hugeint")
    contract = load_contract("dim_courier")
    assert contract.key == ("courier_id",)
    described = [(name, t.upper()) for name, t in contract.columns]
    assert check_duckdb_contract(contract, described) == []
    swapped = [described[1], described[0], *described[2:]]
    assert "differ from its dbt contract" in check_duckdb_contract(contract, swapped)[0]
    assert check_row_count("fct_orders", 10, 10, ROW_DROP_MIN_ROWS - 1, 0.5) == []
    assert check_row_count("late_events", 0, 0, 10_000, 0.5) == []
    assert len(check_row_count("fct_orders", 10, 11, 1000, 0.5)) == 2


def test_keys_check_reports_nulls(world: tuple[Catalog, duckdb.DuckDBPyConnection]) -> None:
    from logistics_platform.lib.transform.audit import check_keys

    _, con = world
    rows = pa.table({"courier_id": pa.array([1, None, 2, 2], pa.int64())})
    failures = check_keys(con, load_contract("dim_courier"), rows)
    assert any("null key" in f for f in failures) and any("appear more than once" in f for f in failures)
