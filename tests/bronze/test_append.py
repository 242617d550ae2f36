"""The open hour ingested as its files land: new files appended, exactly once, on the real clock.

Files land into the CURRENT arrival hour (``datetime.now(UTC)``) in batches, and the hour is ingested after each;
the result must equal one ingest of all the files, whatever happened in between (crashes, re-runs, re-deliveries).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.cli import main
from logistics_platform.defs.bronze.assets import build_bronze_assets
from logistics_platform.defs.bronze.checks import CHECK_ACCOUNTING
from logistics_platform.defs.bronze.keys import EXTRA_KEY, TOPIC_KEYS
from logistics_platform.defs.constants import INGEST_LOG_KEY
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.accounting import SCOPE_INCREMENT, account_hours, account_ingest
from logistics_platform.lib.bronze.commit import HourMovedError
from logistics_platform.lib.bronze.errors import is_transient
from logistics_platform.lib.bronze.ingest import ingest_hour, ingest_hours
from logistics_platform.lib.bronze.reports import PROP_APPENDED_FILES, PROP_MODE
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.maintenance.compaction import compact_table
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.operate.progress import compare, read_ingest_log
from logistics_platform.lib.timekeys import hour_key, hour_start
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import HOUR, cdc, contract_hour, dump, order, ping, write_file

TABLES = [*bs.TOPICS, bs.QUARANTINE_TABLE, bs.INGEST_LOG_TABLE]
ORDERS, PINGS, PAYMENTS, COURIERS = (
    "oltp.public.orders",
    "logistics.tracking_pings",
    "oltp.public.payments",
    "oltp.public.couriers",
)


class Crash(RuntimeError):
    pass


def open_hour() -> datetime:
    """The arrival hour a sink writes into now (naive UTC)."""
    return hour_start(datetime.now(UTC))


def _orders(hour: datetime, first: int, n: int, minute: int) -> list[bytes]:
    t = hour + timedelta(minutes=minute)
    return [dump(cdc("c", "orders", order(i, t), lsn=10_000 + i, ts=t)) for i in range(first, first + n)]


def batch_2(landing: Path, hour: datetime) -> None:
    """New files of three topics: valid rows, an invalid line, a tombstone, a gzip file."""
    write_file(landing, ORDERS, hour, 0, 1000, [*_orders(hour, 100, 4, 20), b"{broken", b"null"])
    t = hour + timedelta(minutes=21)
    write_file(landing, PINGS, hour, 1, 0, [dump(ping(f"b2-{i}", t)) for i in range(3)], gz=True)
    payment = {
        "payment_id": 2,
        "order_id": 100,
        "amount": "129.90",
        "method": "card",
        "status": "authorized",
        "created_at": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "updated_at": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    write_file(landing, PAYMENTS, hour, 2, 0, [dump(cdc("c", "payments", payment, lsn=40, ts=t))])


def batch_3(landing: Path, hour: datetime) -> None:
    """More orders, a courier update, and a file of tombstones only (nothing but its log entry changes)."""
    write_file(landing, ORDERS, hour, 2, 0, _orders(hour, 200, 3, 30))
    t = hour + timedelta(minutes=31)
    courier = {"courier_id": 8, "name": "Bo", "region": "south", "vehicle": "car", "active": True}
    write_file(
        landing, COURIERS, hour, 0, 100, [dump(cdc("c", "couriers", {**courier, "updated_at": "x"}, lsn=50, ts=t))]
    )
    write_file(landing, ORDERS, hour, 3, 0, [b"null", b"null"])


def batch_4(landing: Path, hour: datetime) -> None:
    """A file of an earlier partition's later offsets, landing last."""
    write_file(landing, ORDERS, hour, 0, 2000, _orders(hour, 300, 2, 40), gz=True)


def live_files(settings: Settings, table: str) -> set[str]:
    t = load_catalog(settings).load_table(f"bronze.{table}")
    return {task.file.file_path for task in t.scan().plan_files()}


def snapshot_ids(settings: Settings) -> dict[str, int | None]:
    catalog = load_catalog(settings)
    out = {}
    for t in TABLES:
        snap = catalog.load_table(f"bronze.{t}").current_snapshot()
        out[t] = snap.snapshot_id if snap else None
    return out


def single_ingest(settings: Settings, tmp_path: Path, hours: list[datetime]) -> Settings:
    """A copy of the landing zone as it is now, ingested once, in a catalog of its own."""
    ref = local_settings(tmp_path / "single", landing_dir=tmp_path / "single" / "landing")
    shutil.copytree(settings.landing_dir, ref.landing_dir)
    ingest_hours(ref, hours)
    return ref


def assert_same_bronze(left: Settings, right: Settings) -> dict[str, int]:
    """Every bronze table holds the same rows in both catalogs (EXCEPT ALL both ways); table -> row count."""
    con = connect()
    counts = {}
    try:
        for t in TABLES:
            a = load_catalog(left).load_table(f"bronze.{t}").metadata_location
            b = load_catalog(right).load_table(f"bronze.{t}").metadata_location
            only_left = con.execute(
                "select * from iceberg_scan(?) except all select * from iceberg_scan(?)", [a, b]
            ).fetchall()
            only_right = con.execute(
                "select * from iceberg_scan(?) except all select * from iceberg_scan(?)", [b, a]
            ).fetchall()
            assert not only_left, f"{t}: rows only in the micro-batched tables: {only_left[:3]}"
            assert not only_right, f"{t}: rows only in the single ingest: {only_right[:3]}"
            counts[t] = con.execute("select count(*) from iceberg_scan(?)", [a]).fetchone()[0]
    finally:
        con.close()
    return counts


def test_open_hour_in_batches_is_ingested_exactly_once_by_appends(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "live")
    hour = open_hour()
    contract_hour(settings.landing_dir, hour)
    first = ingest_hour(settings, hour)
    assert first.mode == "replace" and first.mode_reason == "not ingested before"

    for batch in (batch_2, batch_3, batch_4):
        before = {t: live_files(settings, t) for t in TABLES}
        snaps = snapshot_ids(settings)
        batch(settings.landing_dir, hour)
        report = ingest_hour(settings, hour)
        assert report.mode == "append", report.mode_reason
        catalog = load_catalog(settings)
        for t in TABLES:
            after = live_files(settings, t)
            table = catalog.load_table(f"bronze.{t}")
            if t == bs.INGEST_LOG_TABLE:  # the hour's log rows are replaced by the cumulative ones
                assert table.current_snapshot().summary.operation.value == "overwrite"
                assert len(after) == len(before[t])  # still one file per hour
            elif after != before[t]:
                assert table.current_snapshot().summary.operation.value == "append", t
                assert before[t] < after, t  # the earlier batches' files untouched
            else:
                assert table.current_snapshot().snapshot_id == snaps[t], t  # nothing to add: no commit
        # Only the new files were read, and their accounting balances on its own.
        assert report.read_files == sum(len(t.read_files) for t in report.topics.values()) > 0
        accounts = account_ingest(settings, [report])[hour]
        assert all(a.balanced and a.scope == SCOPE_INCREMENT for a in accounts.values()), accounts
        assert sum(a.files for a in accounts.values()) == report.read_files

    orders = load_catalog(settings).load_table("bronze.orders").current_snapshot().summary.additional_properties
    assert orders[PROP_MODE] == "append"
    assert [rel for rel, _ in json.loads(orders[PROP_APPENDED_FILES])] == [
        f"topics/{ORDERS}/dt={hour:%Y-%m-%d}/hr={hour:%H}/{ORDERS}+0+0000002000.json.gz"
    ]
    # The whole hour accounts for every landed line, and equals one ingest of all the files.
    assert all(a.balanced for a in account_hours(settings, [hour])[hour].values())
    counts = assert_same_bronze(settings, single_ingest(settings, tmp_path, [hour]))
    assert counts["orders"] == 7 + 4 + 3 + 2 and counts["tracking_pings"] == 4 + 3
    assert counts[bs.INGEST_LOG_TABLE] == 5


def test_open_hour_status_in_verify(tmp_path: Path, cli_env: Callable[[Settings], None], capsys) -> None:
    settings = local_settings(tmp_path)
    hour = open_hour()
    contract_hour(settings.landing_dir, hour)
    ingest_hour(settings, hour)
    batch_2(settings.landing_dir, hour)
    now = datetime.now(UTC)
    (report,) = compare(
        scan_landing(settings.landing_dir, lookback_days=None),
        read_ingest_log(load_catalog(settings)),
        settings.landing_dir,
        now=now,
    )
    if hour_start(now) == hour:  # the hour did not close while the test ran
        assert (report.status, report.ingested_files, report.pending_files) == ("open", 6, 3)
    # The same state an hour later is a closed hour whose files changed since its ingest.
    (later,) = compare(
        scan_landing(settings.landing_dir, lookback_days=None),
        read_ingest_log(load_catalog(settings)),
        settings.landing_dir,
        now=now + timedelta(hours=1),
    )
    assert later.status == "changed" and len(later.new_files) == 3

    cli_env(settings)
    code = main(["verify"])
    out = capsys.readouterr().out
    if hour_start(datetime.now(UTC)) == hour:
        assert code == 0 and f"{hour_key(hour)}  OPEN, 6 files ingested, 3 new" in out, out
    # A logged file that changes makes even the open hour a repair case.
    write_file(settings.landing_dir, ORDERS, hour, 0, 0, _orders(hour, 900, 2, 50))
    assert main(["verify"]) == 1
    assert f"{hour_key(hour)}  CHANGED" in capsys.readouterr().out


@pytest.mark.parametrize("crash_at", ["bronze.payments", "bronze.quarantine", "bronze.ingest_log"])
def test_a_crash_between_data_and_log_then_a_rerun_is_exactly_once(tmp_path: Path, crash_at: str) -> None:
    settings = local_settings(tmp_path / "live")
    hour = open_hour()
    contract_hour(settings.landing_dir, hour)
    ingest_hour(settings, hour)
    logged = read_ingest_log(load_catalog(settings))
    batch_2(settings.landing_dir, hour)

    def crash(identifier: str) -> None:
        if identifier == crash_at:
            raise Crash(f"injected crash before committing {identifier}")

    with pytest.raises(Crash):
        ingest_hour(settings, hour, before_commit=crash)
    # The orders append committed (it comes first), the log did not: the hour holds rows the log does not count.
    assert read_ingest_log(load_catalog(settings)) == logged
    assert account_hours(settings, [hour])[hour]["orders"].bronze_rows == logged[(ORDERS, hour_key(hour))].rows + 4

    report = ingest_hour(settings, hour)
    assert report.mode == "replace" and "stopped between its commits" in report.mode_reason, report.mode_reason
    assert all(a.balanced for a in account_hours(settings, [hour])[hour].values())
    # A later batch appends again, and the whole equals one ingest of every file.
    batch_3(settings.landing_dir, hour)
    assert ingest_hour(settings, hour).mode == "append"
    assert_same_bronze(settings, single_ingest(settings, tmp_path, [hour]))


def test_rerun_and_redelivery_commit_nothing(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    hour = open_hour()
    contract_hour(settings.landing_dir, hour)
    ingest_hour(settings, hour)
    batch_2(settings.landing_dir, hour)
    ingest_hour(settings, hour)
    snaps = snapshot_ids(settings)

    again = ingest_hour(settings, hour)
    assert again.mode == "unchanged" and again.read_files == 0
    assert snapshot_ids(settings) == snaps
    # The sink re-delivers a file under the same name with the same bytes: nothing to do either.
    batch_2(settings.landing_dir, hour)
    assert ingest_hour(settings, hour).mode == "unchanged"
    assert snapshot_ids(settings) == snaps
    accounts = account_ingest(settings, [again])[hour]
    assert all(a.balanced and a.lines == 0 for a in accounts.values())


def test_a_changed_file_replaces_the_hour(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "live")
    hour = open_hour()
    contract_hour(settings.landing_dir, hour)
    ingest_hour(settings, hour)
    batch_2(settings.landing_dir, hour)
    ingest_hour(settings, hour)
    # A file of the second batch comes back longer (a producer that re-wrote it): not an append case.
    write_file(settings.landing_dir, ORDERS, hour, 0, 1000, [*_orders(hour, 100, 5, 20), b"{broken", b"null"])
    batch_3(settings.landing_dir, hour)

    report = ingest_hour(settings, hour)
    assert report.mode == "replace" and "changed size" in report.mode_reason
    orders = load_catalog(settings).load_table("bronze.orders").current_snapshot()
    assert orders.summary.operation.value == "overwrite"
    assert all(a.balanced for a in account_ingest(settings, [report])[hour].values())
    assert_same_bronze(settings, single_ingest(settings, tmp_path, [hour]))


def test_a_concurrent_ingest_of_the_hour_stops_the_stale_append(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "live")
    hour = open_hour()
    contract_hour(settings.landing_dir, hour)
    ingest_hour(settings, hour)
    batch_2(settings.landing_dir, hour)

    def other_writer(identifier: str) -> None:
        if identifier == "bronze.orders":
            # Another run ingests the same hour after this one planned its append, before it commits.
            ingest_hour(settings, hour, replace=True)

    with pytest.raises(HourMovedError, match="changed by another writer") as stopped:
        ingest_hour(settings, hour, before_commit=other_writer)
    assert is_transient(stopped.value)  # the run's retry policy plans the hour again
    assert ingest_hour(settings, hour).mode == "unchanged"
    assert_same_bronze(settings, single_ingest(settings, tmp_path, [hour]))


def test_a_damaged_file_in_the_hour_still_allows_appends(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "live")
    hour = open_hour()
    contract_hour(settings.landing_dir, hour)
    cut = write_file(settings.landing_dir, ORDERS, hour, 5, 0, _orders(hour, 500, 200, 10), gz=True)
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    assert ingest_hour(settings, hour).topics["orders"].corrupt_files
    batch_2(settings.landing_dir, hour)
    # The quarantine holds one row more than the logged lines (the damaged file's): that row is of a logged file.
    report = ingest_hour(settings, hour)
    assert report.mode == "append", report.mode_reason
    assert_same_bronze(settings, single_ingest(settings, tmp_path, [hour]))


def test_an_hour_compacted_with_others_is_replaced(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "live")
    hours = [HOUR, HOUR + timedelta(hours=1)]  # two hours of one day: compaction merges them into one file
    for h in hours:
        write_file(settings.landing_dir, ORDERS, h, 0, 0, _orders(h, 1, 3, 5))
    ingest_hours(settings, hours)
    orders = load_catalog(settings).load_table("bronze.orders")
    assert compact_table(orders, small_file_bytes=1 << 30, target_file_bytes=1 << 30).committed
    write_file(settings.landing_dir, ORDERS, HOUR, 1, 0, _orders(HOUR, 50, 2, 6))

    report = ingest_hour(settings, HOUR)
    assert report.mode == "replace" and "compacted" in report.mode_reason
    assert_same_bronze(settings, single_ingest(settings, tmp_path, hours))


def test_dagster_metadata_says_appended_or_replaced(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    key = hour_key(HOUR)  # a past hour: the asset's partitions end at the last closed hour
    expected = contract_hour(settings.landing_dir, HOUR)
    assets = [build_bronze_assets(settings)]
    resources = build_resources(settings)
    assert dg.materialize(assets, partition_key=key, resources=resources).success
    batch_2(settings.landing_dir, HOUR)

    result = dg.materialize(assets, partition_key=key, resources=resources)
    assert result.success
    by_key = _metadata(result)
    orders = by_key[TOPIC_KEYS["orders"]]
    assert orders["ingest_mode"].value == "append"
    assert (orders["files_read"].value, orders["lines_read"].value) == (1, 6)
    assert orders["lines"].value == expected["orders"]["lines"] + 6  # the hour after the append
    log = by_key[INGEST_LOG_KEY]
    assert log["ingest_mode"].value == "append" and log["files_read"].value == 3
    # Each bronze table records its own Iceberg commit, a part of the run's ingest (topics outside the contract: none).
    assert by_key.pop(EXTRA_KEY)["rows_by_table"].value == {}
    assert len(by_key) == len(TABLES)
    for meta in by_key.values():
        assert 0 < meta["commit_seconds"].value <= meta["duration_seconds"].value
    checks = {(c.asset_key, c.check_name): c for c in result.get_asset_check_evaluations()}
    acc = checks[(TOPIC_KEYS["orders"], CHECK_ACCOUNTING)]
    assert acc.passed and acc.metadata["scope"].value == SCOPE_INCREMENT and acc.metadata["lines"].value == 6

    # A backfill run re-ingests the hour whole.
    again = dg.materialize(assets, partition_key=key, resources=resources, tags={"dagster/backfill": "b1"})
    assert again.success
    meta = _metadata(again)
    assert meta[TOPIC_KEYS["orders"]]["ingest_mode"].value == "replace"
    assert meta[TOPIC_KEYS["orders"]]["files_read"].value == 3


def _metadata(result: dg.ExecuteInProcessResult) -> dict[dg.AssetKey, dict]:
    """Asset key -> the metadata of its materialization in the run."""
    return {
        e.asset_key: e.step_materialization_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
