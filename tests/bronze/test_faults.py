"""Storage and producer faults in one arrival hour: damaged files, byte-order marks, retry decisions."""

from __future__ import annotations

import gzip
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import dagster as dg
import pytest
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, StringType

from logistics_platform.cli import main
from logistics_platform.defs.bronze.assets import build_bronze_assets
from logistics_platform.defs.bronze.checks import CHECK_ACCOUNTING
from logistics_platform.defs.bronze.keys import TOPIC_KEYS
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.errors import is_transient
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import (
    CorruptFileError,
    list_hour_files,
    scan_file,
)
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.operate.progress import compare, read_corrupt_files, read_ingest_log
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import HOUR, account_hour, cdc, contract_hour, dump, iter_lines, order, ping, write_file

KEY = hour_key(HOUR)
ORDERS = "oltp.public.orders"


def _rows(settings: Settings, table: str) -> list[dict]:
    t = load_catalog(settings).load_table(f"bronze.{table}")
    return t.scan(row_filter=f"_arrival_hour = '{HOUR.isoformat()}'").to_arrow().to_pylist()


def _orders(first: int, n: int, hour: datetime = HOUR) -> list[bytes]:
    return [dump(cdc("c", "orders", order(i, hour), lsn=10_000 + i, ts=hour)) for i in range(first, first + n)]


def test_truncated_gzip_mid_hour_is_quarantined_and_the_hour_commits(
    tmp_path: Path, cli_env: Callable[[Settings], None], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = local_settings(tmp_path)
    expected = contract_hour(settings.landing_dir)
    # A file of 400 orders whose upload was cut short, between valid files of the same topic and hour.
    write_file(settings.landing_dir, ORDERS, HOUR, 5, 100, _orders(100, 20))
    cut = write_file(settings.landing_dir, ORDERS, HOUR, 5, 200, _orders(200, 400), gz=True)
    full_size = cut.stat().st_size
    cut.write_bytes(cut.read_bytes()[: full_size // 2])
    write_file(settings.landing_dir, ORDERS, HOUR, 5, 900, _orders(900, 20), gz=True)
    rel = cut.relative_to(settings.landing_dir).as_posix()

    result = dg.materialize(
        [build_bronze_assets(settings)], partition_key=KEY, resources=build_resources(settings), raise_on_error=False
    )
    assert result.success

    orders = {r["order_id"]: r for r in _rows(settings, "orders")}
    readable = sorted(i for i in orders if 200 <= i < 600)
    assert 0 < len(readable) < 400 and readable == list(range(200, 200 + len(readable)))  # a prefix, no gap
    assert set(range(100, 120)) | set(range(900, 920)) <= set(orders)  # the files around it
    assert all(orders[i]["_offset"] == i for i in readable)  # record addresses as usual
    for table, exp in expected.items():  # every other topic of the hour
        if table != "orders":
            assert len(_rows(settings, table)) == exp["rows"], table

    (row,) = [q for q in _rows(settings, bs.QUARANTINE_TABLE) if q["reason"] == "corrupt_file"]
    assert row["_source_file"] == rel and row["_kafka_partition"] == 5 and row["_offset"] == 200 + len(readable)
    detail = row["error_detail"]
    assert "truncated" in detail and f"after {len(readable)} complete lines" in detail
    assert f"file size {full_size // 2} bytes" in detail

    checks = {(c.asset_key, c.check_name): c for c in result.get_asset_check_evaluations()}
    acc = checks[(TOPIC_KEYS["orders"], CHECK_ACCOUNTING)]
    assert not acc.passed and acc.severity == dg.AssetCheckSeverity.WARN and rel in (acc.description or "")
    assert acc.metadata["balanced"].value is True
    assert checks[(TOPIC_KEYS["payments"], CHECK_ACCOUNTING)].passed

    cli_env(settings)
    assert main(["verify"]) == 1
    out = capsys.readouterr().out
    assert f"{KEY}  CORRUPT" in out and f"corrupt file: {rel}" in out

    # The producer re-delivers the file: its size changes, the hour is stale, a re-ingest clears the row.
    write_file(settings.landing_dir, ORDERS, HOUR, 5, 200, _orders(200, 400), gz=True)
    reports = compare(
        scan_landing(settings.landing_dir, lookback_days=None),
        read_ingest_log(load_catalog(settings)),
        settings.landing_dir,
        read_corrupt_files(load_catalog(settings)),
    )
    assert [r.status for r in reports] == ["changed"]
    again = dg.materialize([build_bronze_assets(settings)], partition_key=KEY, resources=build_resources(settings))
    assert again.success and all(c.passed for c in again.get_asset_check_evaluations() if c.check_name == "accounting")
    assert not [q for q in _rows(settings, bs.QUARANTINE_TABLE) if q["reason"] == "corrupt_file"]
    assert set(range(200, 600)) <= {r["order_id"] for r in _rows(settings, "orders")}
    assert main(["verify"]) == 0


def test_damaged_unreadable_and_foreign_files_are_each_one_quarantine_row(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    flipped = write_file(settings.landing_dir, ORDERS, HOUR, 0, 0, _orders(0, 300), gz=True)
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a bit flip in the middle of the compressed data
    flipped.write_bytes(bytes(data))
    not_gzip = write_file(settings.landing_dir, ORDERS, HOUR, 1, 0, _orders(1000, 3))
    not_gzip.rename(not_gzip.with_name(not_gzip.name + ".gz"))  # plain text named .json.gz
    write_file(settings.landing_dir, ORDERS, HOUR, 2, 0, _orders(2000, 5))

    report = ingest_hour(settings, HOUR)
    corrupt = report.topics["orders"].corrupt_files
    assert sorted(Path(r).name for r in corrupt) == [f"{ORDERS}+0+0000000000.json.gz", f"{ORDERS}+1+0000000000.json.gz"]
    assert any("0 complete lines" in why for why in corrupt.values())
    ids = {r["order_id"] for r in _rows(settings, "orders")}
    assert set(range(2000, 2005)) <= ids and not ids & set(range(1000, 1003))
    acc = account_hour(settings, HOUR)["orders"]
    assert acc.balanced and len(acc.corrupt_files) == 2 and acc.corrupt_rows == 2
    assert acc.lines == report.topics["orders"].lines == len(ids)  # readable lines, each one a row


def test_a_utf8_byte_order_mark_is_not_part_of_the_first_line(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    plain = write_file(settings.landing_dir, ORDERS, HOUR, 0, 0, _orders(1, 3))
    plain.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    gz = write_file(settings.landing_dir, "logistics.tracking_pings", HOUR, 0, 0, [])
    gz.unlink()
    body = b"\xef\xbb\xbf" + dump(ping("p-bom", HOUR)) + b"\r\n" + b"\xef\xbb\xbf" + dump(ping("p-mid", HOUR)) + b"\n"
    gz.with_name(gz.name + ".gz").write_bytes(gzip.compress(body, mtime=0))

    (f,) = list_hour_files(settings.landing_dir, ORDERS, HOUR)
    assert next(iter_lines(f)).startswith(b'{"') and scan_file(f).lines == 3
    report = ingest_hour(settings, HOUR)
    assert report.topics["orders"].rows == 3 and report.topics["orders"].quarantined == 0
    assert {r["order_id"] for r in _rows(settings, "orders")} == {1, 2, 3}
    pings = report.topics["tracking_pings"]
    # only the mark at the start of the file is stripped; one inside the file stays part of its line
    assert (pings.rows, pings.quarantined_by_reason) == (1, {"malformed_json": 1})
    assert all(a.balanced and not a.corrupt_files for a in account_hour(settings, HOUR).values())


def test_damage_in_the_first_bytes_and_empty_files(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    empty = write_file(settings.landing_dir, ORDERS, HOUR, 0, 0, [], gz=True)
    assert scan_file(list_hour_files(settings.landing_dir, ORDERS, HOUR)[0]).corrupt is None
    empty.write_bytes(b"")  # a zero-byte .gz: nothing landed, nothing damaged (as gzip reads it)
    (f,) = list_hour_files(settings.landing_dir, ORDERS, HOUR)
    assert list(iter_lines(f)) == [] and scan_file(f).corrupt is None
    empty.write_bytes(b"\x1f\x8b")  # a header cut short
    (f,) = list_hour_files(settings.landing_dir, ORDERS, HOUR)
    with pytest.raises(CorruptFileError, match="truncated"):
        list(iter_lines(f))


# ---------------------------------------------------------------------------------------------------------------
# Retry decisions
# ---------------------------------------------------------------------------------------------------------------
def _step_events(result: dg.ExecuteInProcessResult, kind: dg.DagsterEventType) -> list[dg.DagsterEvent]:
    return [e for e in result.all_events if e.event_type == kind]


def test_a_deterministic_error_fails_at_once_without_retries(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    contract_hour(settings.landing_dir)
    catalog = load_catalog(settings)
    # Someone created bronze.orders with order_id as a string: the contract's long values cannot be written.
    schema = bs.table_schema(bs.TOPICS["orders"])
    fields = [
        NestedField(f.field_id, f.name, StringType(), required=f.required) if f.name == "order_id" else f
        for f in schema.fields
    ]
    catalog.create_table("bronze.orders", schema=Schema(*fields))

    result = dg.materialize(
        [build_bronze_assets(settings)], partition_key=KEY, resources=build_resources(settings), raise_on_error=False
    )
    assert not result.success
    assert not _step_events(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    (failure,) = _step_events(result, dg.DagsterEventType.STEP_FAILURE)
    error = failure.step_failure_data.error
    assert error is not None and error.cause is None  # the alert's root cause is this one line
    assert "not retried" in error.message and f"arrival hour {KEY}" in error.message
    assert "\n" not in error.message.strip().split(": ", 1)[-1]


def test_a_locked_catalog_is_retried_and_then_succeeds(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    contract_hour(settings.landing_dir)
    load_catalog(settings)  # create the catalog database
    db = settings.catalog_uri[len("sqlite:///") :]
    holder = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    holder.execute("begin exclusive")  # another process holds the catalog database: every access waits, then fails
    stop = threading.Event()

    def release_after_first_failure(instance: dg.DagsterInstance) -> None:
        retry = dg.EventRecordsFilter(event_type=dg.DagsterEventType.STEP_UP_FOR_RETRY)
        while not stop.wait(0.2) and not instance.get_event_records(retry, limit=1):
            pass
        holder.execute("rollback")

    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        t = threading.Thread(target=release_after_first_failure, args=(instance,), daemon=True)
        t.start()
        try:
            result = dg.materialize(
                [build_bronze_assets(settings)],
                partition_key=KEY,
                resources=build_resources(settings),
                instance=instance,
                raise_on_error=False,
            )
        finally:
            stop.set()
            t.join()
            holder.close()
    (retry,) = _step_events(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    assert "locked" in str(retry.event_specific_data)
    assert result.success


def test_the_classification_of_real_errors(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    catalog = load_catalog(settings)
    db = settings.catalog_uri[len("sqlite:///") :]
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("begin exclusive")
    locked = sqlite3.connect(db, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as lock_error:
        locked.execute("select 1 from sqlite_master").fetchall()
    holder.execute("rollback")
    assert is_transient(lock_error.value)
    assert is_transient(CommitFailedException("bronze.orders: conflicting commit"))
    assert is_transient(ConnectionResetError(104, "Connection reset by peer"))
    wrapped = RuntimeError("step failed")
    wrapped.__cause__ = TimeoutError("catalog did not answer")
    assert is_transient(wrapped)
    assert not is_transient(ValueError("ALLOWED_LATENESS_HOURS must be a number"))
    assert not is_transient(PermissionError(13, "Permission denied"))
    with pytest.raises(sqlite3.OperationalError) as schema_error:
        sqlite3.connect(db).execute("select * from no_such_catalog_table")
    assert not is_transient(schema_error.value)  # a wrong database, not an unavailable one
    with pytest.raises(Exception) as contract_error:
        catalog.load_table("bronze.no_such_table")
    assert not is_transient(contract_error.value)


def test_a_bad_checksum_after_the_last_line_keeps_every_line_and_long_lines_span_chunks(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    long_line = b" " * (3 * 1024 * 1024 + 17)  # longer than a read step, mostly held back by the output bound
    path = write_file(settings.landing_dir, ORDERS, HOUR, 0, 0, [long_line, *_orders(0, 50)], gz=True)
    (f,) = list_hour_files(settings.landing_dir, ORDERS, HOUR)
    assert [len(x) for x in list(iter_lines(f))[:2]] == [len(long_line), len(_orders(0, 1)[0])]
    raw = bytearray(path.read_bytes())
    raw[-6] ^= 0x01  # the CRC in the trailer: every byte of content is decoded before the check fails
    path.write_bytes(bytes(raw))
    (f,) = list_hour_files(settings.landing_dir, ORDERS, HOUR)
    count = scan_file(f)
    assert count.lines == 51 and count.corrupt is not None and "incorrect data check" in count.corrupt
