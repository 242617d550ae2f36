"""ingest_hour on real Iceberg tables (SQLite catalog in a temp dir), read back by pyiceberg and DuckDB."""

from __future__ import annotations

import json
import multiprocessing
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.ingest_log import read_log_entries
from logistics_platform.lib.bronze.reports import (
    PROP_FILES_IN,
    PROP_FINGERPRINT,
    PROP_LINES,
    PROP_PARTITION_KEY,
    PROP_RUN_ID,
)
from logistics_platform.lib.bronze.tables import TABLE_PROPERTIES, ensure_bronze_tables
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import HOUR, account_hour, cdc, contract_hour, dump, order, ping, write_file

ALL_TABLES = [*bs.TOPICS, bs.QUARANTINE_TABLE, bs.INGEST_LOG_TABLE]


def rows(settings: Settings, table: str, hour: datetime | None = None, column: str = "_arrival_hour") -> list[dict]:
    t = load_catalog(settings).load_table(f"bronze.{table}")
    data = t.scan(row_filter=f"{column} = '{hour.isoformat()}'" if hour else "True").to_arrow().to_pylist()
    return sorted(data, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def live_files(settings: Settings, table: str) -> set[str]:
    t = load_catalog(settings).load_table(f"bronze.{table}")
    return {task.file.file_path for task in t.scan().plan_files()}


def land_order_in_next_hour(settings: Settings, order_id: int) -> datetime:
    """One order create landed in the hour after HOUR (a file of its own); returns that hour."""
    other = HOUR + timedelta(hours=1)
    event = cdc("c", "orders", order(order_id, other), lsn=850 + order_id, ts=other)
    write_file(settings.landing_dir, "oltp.public.orders", other, 0, 100, [dump(event)])
    return other


@pytest.fixture
def ingested(tmp_path):
    settings = local_settings(tmp_path)
    expected = contract_hour(settings.landing_dir)
    report = ingest_hour(settings, HOUR, run_id="run-1")
    return settings, expected, report


def test_every_case_lands_where_sources_md_says(ingested):
    settings, expected, report = ingested
    for table, exp in expected.items():
        tr = report.topics[table]
        assert tr.lines == exp["lines"], table
        assert tr.rows == exp["rows"], table
        assert tr.tombstones == exp["tombstones"], table
        assert tr.late_events == exp["late"], table
        assert tr.quarantined_by_reason == exp["quarantined"], table
        assert len(rows(settings, table, HOUR)) == exp["rows"]

    quarantine = rows(settings, bs.QUARANTINE_TABLE)
    assert len(quarantine) == report.quarantined == sum(sum(e["quarantined"].values()) for e in expected.values())
    by_reason = {}
    for q in quarantine:
        by_reason.setdefault((q["_topic"], q["reason"]), []).append(q)
        assert q["error_detail"] and q["_source_file"].startswith("topics/") and q["_arrival_hour"] == HOUR
    (not_utf8,) = [q for q in quarantine if q["raw_encoding"] == "base64"]
    assert not_utf8["reason"] == "malformed_json"
    truncated = [q for q in quarantine if q["raw_line"] == '{"op":"c","after":{"order_id":3']
    assert truncated and truncated[0]["_offset"] == 6  # record address: start offset + line index

    orders = rows(settings, "orders", HOUR)
    deleted = [r for r in orders if r["_op"] == "d"]
    assert deleted == [{**deleted[0], "order_id": 2, "status": None, "total_amount": None}]
    # the added column: present on the row that carried it, null on rows written before it appeared
    assert {r["order_id"]: r["tip_amount"] for r in orders if r["order_id"] in (13, 14)} == {13: None, 14: 2.5}
    assert report.topics["orders"].added_columns == {"tip_amount": "double"}
    assert "tip_amount" in load_catalog(settings).load_table("bronze.orders").schema().column_names
    pings = rows(settings, "tracking_pings", HOUR)
    assert {p["ping_id"] for p in pings} == {"p-1", "p-2", "p-3", "p-6"}  # gzip and the wrapped form included


def test_accounting_holds_and_duckdb_reads_every_table(ingested):
    settings, expected, _ = ingested
    accounts = account_hour(settings, HOUR)
    for table, acc in accounts.items():
        assert acc.balanced, acc
        assert acc.lines == expected[table]["lines"]
    catalog = load_catalog(settings)
    con = connect()
    for table in ALL_TABLES:
        t = catalog.load_table(f"bronze.{table}")
        (n,) = con.execute("select count(*) from iceberg_scan(?)", [t.metadata_location]).fetchone()
        assert n == len(t.scan().to_arrow()) > 0, table
    log = rows(settings, bs.INGEST_LOG_TABLE)
    assert {r["topic"] for r in log} == {s.topic for s in bs.TOPICS.values()}
    assert all(r["lines"] == r["rows"] + r["quarantined"] + r["tombstones"] for r in log)


def test_snapshot_summary_carries_the_lineage(ingested):
    settings, _, report = ingested
    t = load_catalog(settings).load_table("bronze.orders")
    props = t.current_snapshot().summary.additional_properties
    assert props[PROP_PARTITION_KEY] == "2026-11-02-10:00"
    assert props[PROP_RUN_ID] == "run-1"
    assert props[PROP_FINGERPRINT] == report.topics["orders"].fingerprint
    # The input file list is the hour's ingest log row (named by the summary), not a summary property.
    assert props[PROP_FILES_IN] == "bronze.ingest_log"
    orders_topic = bs.TOPICS["orders"].topic
    (entry,) = [e for (topic, _), e in read_log_entries(load_catalog(settings)).items() if topic == orders_topic]
    assert list(entry.files) == report.topics["orders"].files
    assert not any(rel in value for value in props.values() for rel, _ in entry.files)
    assert int(props[PROP_LINES]) == report.topics["orders"].lines


def test_a_new_hour_is_an_append_that_keeps_the_earlier_manifests(ingested):
    settings, _, _ = ingested
    t = load_catalog(settings).load_table("bronze.orders")
    before = {m.manifest_path for m in t.current_snapshot().manifests(t.io)}
    other = land_order_in_next_hour(settings, 51)

    ingest_hour(settings, other)

    t = load_catalog(settings).load_table("bronze.orders")
    assert t.current_snapshot().summary.operation.value == "append"
    after = {m.manifest_path for m in t.current_snapshot().manifests(t.io)}
    assert before < after and len(after - before) == 1  # the earlier hour's manifest is carried, not rewritten
    assert len(rows(settings, "orders", other)) == 1


def test_rerun_changes_nothing_visible_and_never_touches_other_hours(ingested):
    settings, _, _ = ingested
    other = land_order_in_next_hour(settings, 50)
    ingest_hour(settings, other)
    before = {t: rows(settings, t) for t in ALL_TABLES}
    other_files = {f for f in live_files(settings, "orders") if f}
    other_hour_files = {
        task.file.file_path
        for task in load_catalog(settings)
        .load_table("bronze.orders")
        .scan(row_filter=f"_arrival_hour = '{other.isoformat()}'")
        .plan_files()
    }
    snaps_before = len(load_catalog(settings).load_table("bronze.orders").snapshots())

    # An explicit full re-ingest (a plain re-run with the same files commits nothing: tests/bronze/test_append.py).
    ingest_hour(settings, HOUR, run_id="run-2", replace=True)

    assert {t: rows(settings, t) for t in ALL_TABLES} == before
    orders = rows(settings, "orders")
    addresses = [(r["_topic"], r["_kafka_partition"], r["_offset"]) for r in orders]
    assert len(addresses) == len(set(addresses))
    assert other_hour_files <= live_files(settings, "orders")  # the other hour's files were not rewritten
    assert other_files != live_files(settings, "orders")  # while the hour itself was replaced
    t = load_catalog(settings).load_table("bronze.orders")
    assert len(t.snapshots()) == snaps_before + 1  # exactly one commit for the re-run
    assert t.current_snapshot().summary.operation.value == "overwrite"


def test_delayed_file_is_picked_up_on_rerun(ingested):
    settings, expected, _ = ingested
    write_file(
        settings.landing_dir,
        "logistics.tracking_pings",
        HOUR,
        2,
        0,
        [dump(ping("late-upload-1", HOUR)), dump(ping("late-upload-2", HOUR))],
    )
    report = ingest_hour(settings, HOUR)
    assert report.topics["tracking_pings"].rows == expected["tracking_pings"]["rows"] + 2
    ids = {r["ping_id"] for r in rows(settings, "tracking_pings", HOUR)}
    assert {"late-upload-1", "late-upload-2"} <= ids
    assert all(a.balanced for a in account_hour(settings, HOUR).values())


class Crash(RuntimeError):
    pass


def test_crash_between_write_and_commit_leaves_table_unchanged(ingested):
    settings, expected, _ = ingested
    write_file(
        settings.landing_dir,
        "oltp.public.orders",
        HOUR,
        7,
        0,
        [dump(cdc("c", "orders", order(77, HOUR), lsn=5000, ts=HOUR))],
    )
    catalog = load_catalog(settings)
    snapshot_before = catalog.load_table("bronze.orders").current_snapshot().snapshot_id
    rows_before = rows(settings, "orders")
    parquet_before = set((Path(settings.warehouse[len("file://") :])).rglob("*.parquet"))

    def crash(identifier: str) -> None:
        if identifier == "bronze.orders":
            raise Crash("injected crash after writing data files")

    with pytest.raises(Crash):
        ingest_hour(settings, HOUR, before_commit=crash)

    t = load_catalog(settings).load_table("bronze.orders")
    assert t.current_snapshot().snapshot_id == snapshot_before
    assert rows(settings, "orders") == rows_before
    written = set(Path(settings.warehouse[len("file://") :]).rglob("*.parquet")) - parquet_before
    assert written and not ({f"file://{p}" for p in written} & live_files(settings, "orders"))  # orphans

    report = ingest_hour(settings, HOUR)
    assert report.topics["orders"].rows == expected["orders"]["rows"] + 1
    assert 77 in {r["order_id"] for r in rows(settings, "orders", HOUR)}
    assert all(a.balanced for a in account_hour(settings, HOUR).values())


def _two_hours(settings: Settings) -> list[datetime]:
    hours = [HOUR, HOUR + timedelta(hours=1)]
    for i, h in enumerate(hours):
        contract_hour(settings.landing_dir, h) if i == 0 else write_file(
            settings.landing_dir,
            "oltp.public.orders",
            h,
            0,
            0,
            [dump(cdc("c", "orders", order(1000 + n, h), lsn=10_000 + n, ts=h)) for n in range(5)],
        )
        write_file(settings.landing_dir, "logistics.tracking_pings", h, 5, 0, [dump(ping(f"c-{i}", h))])
    return hours


def test_two_concurrent_writers_of_one_table_both_land(tmp_path):
    settings = local_settings(tmp_path)
    hours = _two_hours(settings)
    ingest_hour(settings, hours[0] - timedelta(hours=5))  # create the tables up front: the race is on commits
    barrier = threading.Barrier(2, timeout=60)
    reports, errors = {}, []

    def lined_up(identifier: str) -> None:
        if identifier in ("bronze.orders", "bronze.tracking_pings"):
            barrier.wait()  # both writers loaded the same metadata: one of the two commits must retry

    def run(h: datetime) -> None:
        try:
            reports[h] = ingest_hour(settings, h, before_commit=lined_up)
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(h,)) for h in hours]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for table in ("orders", "tracking_pings"):
        assert sorted(r.topics[table].commit_attempts for r in reports.values())[-1] >= 2, table
    for h in hours:
        assert all(
            a.balanced and (a.lines == 0 or a.bronze_rows + a.quarantine_rows > 0)
            for a in account_hour(settings, h).values()
        )
    assert len({r["arrival_hour"] for r in rows(settings, bs.INGEST_LOG_TABLE)}) == 2


def _ingest_in_process(root: str, hour: str) -> None:
    ingest_hour(local_settings(Path(root)), datetime.fromisoformat(hour))


def test_two_writer_processes_both_land(tmp_path):
    settings = local_settings(tmp_path)
    hours = _two_hours(settings)
    ingest_hour(settings, hours[0] - timedelta(hours=5))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_ingest_in_process, args=(str(tmp_path), h.isoformat())) for h in hours]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    for h in hours:
        accounts = account_hour(settings, h)
        assert all(a.balanced for a in accounts.values())
        assert accounts["tracking_pings"].bronze_rows >= 1


def test_worker_processes_give_the_same_tables(tmp_path):
    serial = local_settings(tmp_path / "serial", ingest_workers=1, ingest_batch_rows=5)
    parallel = local_settings(tmp_path / "parallel", ingest_workers=2, ingest_batch_rows=5)
    for s in (serial, parallel):
        contract_hour(s.landing_dir)
        write_file(
            s.landing_dir,
            "logistics.tracking_pings",
            HOUR,
            3,
            0,
            [dump(ping(f"bulk-{i}", HOUR, battery=0.5)) for i in range(40)],
        )  # a column added in a worker
    a = ingest_hour(serial, HOUR)
    b = ingest_hour(parallel, HOUR, parallel_min_bytes=0)
    assert a.quarantined_by_reason == b.quarantined_by_reason and a.rows == b.rows
    assert b.topics["tracking_pings"].added_columns == {"battery": "double"}
    for table in ALL_TABLES:  # relative paths: identical in both roots, so every column must match
        ra, rb = rows(serial, table), rows(parallel, table)
        assert ra == rb, table


def test_truncated_gzip_file_is_quarantined_and_its_readable_lines_ingested(ingested):
    settings, expected, _ = ingested
    good = write_file(
        settings.landing_dir,
        "logistics.tracking_pings",
        HOUR,
        9,
        0,
        [dump(ping(f"z-{i}", HOUR)) for i in range(50)],
        gz=True,
    )
    good.write_bytes(good.read_bytes()[:-20])  # truncated upload: the trailer and the end of the data are missing
    report = ingest_hour(settings, HOUR)
    tr = report.topics["tracking_pings"]
    (rel,) = tr.corrupt_files
    assert rel.endswith("tracking_pings+9+0000000000.json.gz") and "truncated" in tr.corrupt_files[rel]
    pings = {r["ping_id"] for r in rows(settings, "tracking_pings", HOUR)}
    readable = {p for p in pings if p.startswith("z-")}
    assert 40 < len(readable) < 50 and readable == {f"z-{i}" for i in range(len(readable))}
    assert tr.rows == expected["tracking_pings"]["rows"] + len(readable)
    (q,) = [r for r in rows(settings, bs.QUARANTINE_TABLE) if r["reason"] == "corrupt_file"]
    assert q["_source_file"] == rel and q["_offset"] == len(readable) and q["_kafka_partition"] == 9
    assert f"file size {good.stat().st_size} bytes" in q["error_detail"]
    assert len(rows(settings, "orders", HOUR)) == expected["orders"]["rows"]  # the other topics of the hour
    acc = account_hour(settings, HOUR)["tracking_pings"]
    assert acc.balanced and acc.corrupt_files == (rel,)


def test_tables_of_an_older_version_get_the_current_write_properties(catalog):
    spec = bs.TOPICS["orders"]
    dict_size = "write.parquet.dict-size-bytes"
    # As created before the dictionary and compression-level properties were set.
    old = {k: v for k, v in TABLE_PROPERTIES.items() if k not in (dict_size, "write.parquet.compression-level")}
    created = catalog.create_table(spec.identifier, schema=bs.table_schema(spec), properties=old)
    assert dict_size not in created.properties
    for table in ensure_bronze_tables(catalog).values():
        props = catalog.load_table(table.name()).properties
        assert {k: props.get(k) for k in TABLE_PROPERTIES} == TABLE_PROPERTIES, table.name()
