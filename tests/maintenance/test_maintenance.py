"""Maintenance on real Iceberg tables in temp dirs: compaction, races, expiry, orphans, crashes, tags, time travel."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.expressions import EqualTo
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import DecimalType, LongType, NestedField, StringType

from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.iceberg_internals import arrow_to_data_files
from logistics_platform.lib.maintenance import Hooks, MaintenanceOptions, maintain_table
from logistics_platform.lib.maintenance.compaction import compact_table, row_checksum
from logistics_platform.lib.maintenance.expiry import expire_table
from logistics_platform.lib.maintenance.files import (
    find_orphans,
    list_files,
    normalize,
    pyarrow_io,
    referenced_files,
    remove_orphans,
)
from logistics_platform.lib.maintenance.health import table_health
from logistics_platform.lib.maintenance.manifests import rewrite_manifests
from logistics_platform.lib.maintenance.tags import (
    TimeTravelError,
    apply_daily_tags,
    query_as_of,
    resolve_as_of,
    snapshot_current_at,
)
from logistics_platform.resources import build_resources
from logistics_platform.settings import local_settings
from tests.support.synthetic import append_hour, create_bronze_table, hour_rows, replace_hour

DAY1 = datetime(2026, 11, 1)
SMALL = 1 << 20  # every test file is far below 1 MiB: all are "small"
TARGET = 1 << 20


class Crash(RuntimeError):
    """Raised from a hook to stop maintenance where a real crash would."""


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return load_catalog(local_settings(tmp_path))


def _hourly_table(catalog: Catalog, hours: int = 30, rows: int = 20, name: str = "orders") -> Table:
    table = create_bronze_table(catalog, name)
    for h in range(hours):
        append_hour(table, DAY1 + timedelta(hours=h), rows, seed=h)
    return table


def _checksum(table: Table, snapshot_id: int | None = None) -> str:
    return row_checksum(table.scan(snapshot_id=snapshot_id).to_arrow())


def _duck_count(table: Table, snapshot_id: int) -> int:
    con = connect()
    try:
        loc = table.metadata_location
        return con.execute(f"select count(*) from iceberg_scan('{loc}', snapshot_from_id => {snapshot_id})").fetchone()[
            0
        ]
    finally:
        con.close()


def _live_files(table: Table) -> list[str]:
    return [t.file.file_path for t in table.scan().plan_files()]


def _options(**kw: object) -> MaintenanceOptions:
    base: dict[str, object] = {
        "small_file_bytes": SMALL,
        "target_file_bytes": TARGET,
        "snapshot_retention": timedelta(days=7),
        "min_snapshots_to_keep": 10,
        "orphan_safety_window": timedelta(days=3),
        "max_manifests_per_snapshot": 100,
    }
    base.update(kw)
    return MaintenanceOptions(**base)  # type: ignore[arg-type]


def _age(path: str, days: float) -> None:
    t = time.time() - days * 86400
    os.utime(path, (t, t))


# ------------------------------------------------------------------------------------------------- compaction


def test_compaction_keeps_rows_reduces_files_sorts_and_handles_schema_evolution(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=20)
    # An added column part way through (like orders.tip_amount): old files lack it.
    with table.update_schema() as update:
        update.add_column("tip_amount", DecimalType(12, 2))
    for h in range(20, 30):
        rows = hour_rows(table, DAY1 + timedelta(hours=h), 20, seed=h)
        rows = rows.set_column(
            rows.schema.get_field_index("tip_amount"),
            "tip_amount",
            pa.array([Decimal("1.50")] * rows.num_rows, pa.decimal128(12, 2)),
        )
        table.append(rows)
    before = _checksum(table)
    files_before = len(_live_files(table))

    result = compact_table(table, small_file_bytes=SMALL, target_file_bytes=TARGET)

    assert [p.status for p in result.partitions] == ["committed", "committed"]
    assert files_before == 30 and len(_live_files(table)) == 2
    assert _checksum(table) == before
    for p in result.partitions:
        assert p.checksum_before == p.checksum_after
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None
    assert snap.summary.operation.value == "replace"
    # The checksum recorded in the snapshot is that of all rewritten rows: here every row of the table.
    assert snap.summary["logistics.compaction.rows-checksum"] == before
    # The rewritten files are sorted by event time (the table's sort order).
    for path in _live_files(table):
        times = pq.read_table(path.removeprefix("file://"), columns=["_event_time"]).column(0).to_pylist()
        assert times == sorted(times)
    # Old rows read the added column as null, new ones keep their value.
    tips = table.scan(selected_fields=("tip_amount",)).to_arrow().column(0).to_pylist()
    assert tips.count(None) == 20 * 20 and tips.count(Decimal("1.50")) == 10 * 20
    # DuckDB reads the REPLACE snapshot too.
    assert _duck_count(table, snap.snapshot_id) == 30 * 20


def test_compaction_of_unpartitioned_table(catalog: Catalog) -> None:
    schema = Schema(NestedField(1, "k", LongType(), required=False), NestedField(2, "v", StringType(), required=False))
    table = catalog.create_table("marts.plain", schema=schema)
    for i in range(6):
        table.append(pa.table({"k": pa.array([i, i + 100], pa.int64()), "v": pa.array(["a", None])}))
    before = _checksum(table)
    result = compact_table(table, small_file_bytes=SMALL, target_file_bytes=TARGET)
    assert result.partitions[0].partition == "(unpartitioned)" and result.partitions[0].status == "committed"
    assert len(_live_files(table)) == 1
    assert _checksum(table) == before


@pytest.mark.parametrize("pyiceberg_retries", ["4", "0"], ids=["pyiceberg-retries", "own-retries-like-bronze"])
def test_append_racing_compaction_is_not_lost(catalog: Catalog, tmp_path: Path, pyiceberg_retries: str) -> None:
    table = _hourly_table(catalog, hours=24)
    # Bronze tables turn pyiceberg's commit retries off (the ingest re-plans itself); both paths must hold.
    with table.transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": pyiceberg_retries})
    expected_rows = 24 * 20 + 7
    other_writer = load_catalog(local_settings(tmp_path)).load_table("bronze.orders")
    racing: list[int] = []

    def append_during_commit(_: str) -> None:
        # Another process commits to the same day while compaction has written its files but not committed.
        append_hour(other_writer, DAY1 + timedelta(hours=5, minutes=30), 7, seed=99)
        racing.append(other_writer.current_snapshot().snapshot_id)  # type: ignore[union-attr]

    result = compact_table(table, small_file_bytes=SMALL, target_file_bytes=TARGET, before_commit=append_during_commit)

    assert result.partitions[0].status == "committed"
    assert result.partitions[0].attempts == (2 if pyiceberg_retries == "0" else 1)
    fresh = catalog.load_table("bronze.orders")
    assert len(fresh.scan().to_arrow()) == expected_rows
    # The racing append's file survived as its own file next to the compacted one.
    assert len(_live_files(fresh)) == 2
    # The compaction was re-validated and rebuilt on top of the racing append.
    assert fresh.current_snapshot().parent_snapshot_id == racing[0]  # type: ignore[union-attr]
    assert fresh.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]


def test_compaction_skips_partition_when_a_file_is_replaced_concurrently(catalog: Catalog, tmp_path: Path) -> None:
    table = _hourly_table(catalog, hours=30)
    other_writer = load_catalog(local_settings(tmp_path)).load_table("bronze.orders")

    def reingest_during_commit(_: str) -> None:
        replace_hour(other_writer, DAY1 + timedelta(hours=3), 5, seed=42)

    result = compact_table(
        table, small_file_bytes=SMALL, target_file_bytes=TARGET, before_commit=reingest_during_commit
    )

    day1, day2 = result.partitions
    assert day1.status.startswith("skipped") and day2.status == "committed"
    fresh = catalog.load_table("bronze.orders")
    assert len(fresh.scan().to_arrow()) == 29 * 20 + 5
    assert len(_live_files(fresh)) == 24 + 1  # day 1 untouched (23 + the re-ingested hour), day 2 compacted
    # The files written for the abandoned rewrite were deleted (the commit provably did not land).
    orphans = find_orphans(fresh, safety_window=timedelta(0), now=datetime.now(UTC) + timedelta(seconds=1))
    assert not [f for f in orphans.orphans + orphans.young_unreferenced if f.path.endswith(".parquet")]


def test_reingest_of_one_hour_after_compaction_replaces_exactly_that_hour(catalog: Catalog) -> None:
    from logistics_platform.lib.bronze.commit import commit_hours

    table = _hourly_table(catalog, hours=24)
    compact_table(table, small_file_bytes=SMALL, target_file_bytes=TARGET)
    assert len(_live_files(table)) == 1
    hour = DAY1 + timedelta(hours=7)
    others_before = row_checksum(table.scan(row_filter=f"_arrival_hour != '{hour.isoformat()}'").to_arrow())

    new_rows = hour_rows(table, hour, 3, seed=1234)
    new_files = arrow_to_data_files(table.metadata, table.io, new_rows)
    commit_hours(catalog, "bronze.orders", "_arrival_hour", [hour], new_files, {"test": "reingest"})

    table = catalog.load_table("bronze.orders")
    hour_now = table.scan(row_filter=EqualTo("_arrival_hour", hour.isoformat())).to_arrow()
    assert row_checksum(hour_now) == row_checksum(new_rows)
    others_after = row_checksum(table.scan(row_filter=f"_arrival_hour != '{hour.isoformat()}'").to_arrow())
    assert others_after == others_before


# ------------------------------------------------------------------------------------------------- expiry


def test_expiry_deletes_unreferenced_files_and_keeps_current_and_tagged_readable(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=24)
    tagged = table.metadata.snapshots[4]
    table.manage_snapshots().create_tag(tagged.snapshot_id, "audit").commit()
    tagged_sum, tagged_rows = _checksum(table, tagged.snapshot_id), 5 * 20
    compact_table(table, small_file_bytes=SMALL, target_file_bytes=TARGET)
    current_sum = _checksum(table)
    io = pyarrow_io(table)
    files_before = {f.path for f in list_files(io, table.location())}
    small_files = {normalize(io, p) for p in referenced_files(table).content_files} - {
        normalize(io, p) for p in _live_files(table)
    }

    result = expire_table(table, retention=timedelta(0), min_keep=1, now=datetime.now(UTC) + timedelta(seconds=1))

    assert len(result.snapshots_expired) == 24 + 1 - 2  # 24 appends + compaction, minus current and tagged
    assert {s.snapshot_id for s in table.metadata.snapshots} == {
        tagged.snapshot_id,
        table.current_snapshot().snapshot_id,
    }  # type: ignore[union-attr]
    files_after = {f.path for f in list_files(io, table.location())}
    deleted = files_before - files_after
    assert result.files_deleted > 0 and result.bytes_reclaimed > 0
    # Hourly files that only expired snapshots read are gone; those the tag still reads are kept.
    tag_files = {normalize(io, t.file.file_path) for t in table.scan(snapshot_id=tagged.snapshot_id).plan_files()}
    assert tag_files <= files_after
    assert small_files - tag_files <= deleted
    # Every remaining file is referenced by the retained metadata.
    assert find_orphans(table, safety_window=timedelta(0), now=datetime.now(UTC) + timedelta(seconds=1)).orphans == []
    # Current and tagged snapshots read correctly, through pyiceberg and DuckDB.
    fresh = catalog.load_table("bronze.orders")
    assert _checksum(fresh) == current_sum
    assert _checksum(fresh, tagged.snapshot_id) == tagged_sum
    assert _duck_count(fresh, fresh.current_snapshot().snapshot_id) == 24 * 20  # type: ignore[union-attr]
    assert _duck_count(fresh, resolve_as_of(fresh, "audit").snapshot_id) == tagged_rows


def test_expiry_respects_min_keep_and_retention(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=12)
    now = datetime.now(UTC)
    assert expire_table(table, retention=timedelta(days=7), min_keep=1, now=now).snapshots_expired == []
    result = expire_table(table, retention=timedelta(0), min_keep=5, now=now + timedelta(seconds=1))
    assert len(result.snapshots_expired) == 7 and len(table.metadata.snapshots) == 5
    assert len(table.scan().to_arrow()) == 12 * 20


def test_metadata_files_are_bounded_by_the_metadata_log(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=12)
    io = pyarrow_io(table)
    options = _options(metadata_previous_versions=3, now=datetime.now(UTC) + timedelta(seconds=1))
    maintain_table(table, options)
    append_hour(table, DAY1 + timedelta(hours=40), 5)
    metadata_files = [f for f in list_files(io, table.location()) if f.path.endswith(".metadata.json")]
    assert len(metadata_files) <= 4
    assert len(catalog.load_table("bronze.orders").scan().to_arrow()) == 12 * 20 + 5

    # Metadata files outside the log (e.g. left by a commit that lost a race): deleted by expiry when older
    # than the current metadata file, kept when newer (that could be a commit in flight).
    current = Path(table.metadata_location.removeprefix("file://"))
    stale, in_flight = current.with_name("00001-stale.metadata.json"), current.with_name("99999-new.metadata.json")
    stale.write_bytes(current.read_bytes())
    in_flight.write_bytes(current.read_bytes())
    _age(str(stale), 1)
    os.utime(in_flight, (time.time() + 60, time.time() + 60))
    result = expire_table(table, retention=timedelta(days=7), min_keep=10, now=datetime.now(UTC))
    assert result.metadata_files_deleted == 1 and not stale.exists() and in_flight.exists()
    assert len(catalog.load_table("bronze.orders").scan().to_arrow()) == 12 * 20 + 5


def test_maintenance_of_an_empty_table_is_a_no_op(catalog: Catalog) -> None:
    table = create_bronze_table(catalog, "payments")
    report = maintain_table(table, _options(now=datetime.now(UTC) + timedelta(days=4)))
    assert report.error is None and report.after is not None and report.after.data_files == 0
    assert report.compaction is not None and report.compaction.partitions == []
    assert report.expiry is not None and report.expiry.snapshots_expired == []
    assert catalog.load_table("bronze.payments").scan().to_arrow().num_rows == 0


# ------------------------------------------------------------------------------------------------- orphans


def test_orphans_older_than_the_window_are_removed_younger_kept_dry_run_deletes_nothing(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=3)
    base = table.location().removeprefix("file://")
    old_data = Path(base) / "data" / "_arrival_hour_day=2026-11-01" / "00000-0-orphan-old.parquet"
    old_meta = Path(base) / "metadata" / "snap-1-1-orphan.avro"
    young = Path(base) / "data" / "00000-0-orphan-young.parquet"
    for p, size in ((old_data, 1000), (old_meta, 300), (young, 500)):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x" * size)
    _age(str(old_data), 4)
    _age(str(old_meta), 10)
    now = datetime.now(UTC)

    dry = remove_orphans(table, safety_window=timedelta(days=3), now=now, dry_run=True)
    assert sorted((Path(f.path).name, f.size) for f in dry.orphans) == [
        ("00000-0-orphan-old.parquet", 1000),
        ("snap-1-1-orphan.avro", 300),
    ]
    assert [Path(f.path).name for f in dry.young_unreferenced] == ["00000-0-orphan-young.parquet"]
    assert old_data.exists() and old_meta.exists() and young.exists() and dry.deleted == 0

    real = remove_orphans(table, safety_window=timedelta(days=3), now=now)
    assert real.deleted == 2 and real.orphan_bytes == 1300
    assert not old_data.exists() and not old_meta.exists() and young.exists()
    assert len(catalog.load_table("bronze.orders").scan().to_arrow()) == 3 * 20


# ------------------------------------------------------------------------------------------------- crashes


def test_crash_mid_compaction_leaves_table_readable_and_next_run_finishes(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=24)
    before = _checksum(table)

    def crash(_: str) -> None:
        raise Crash("power cut after the compacted files were written")

    with pytest.raises(Crash):
        maintain_table(table, _options(hooks=Hooks(before_compaction_commit=crash)))

    table = catalog.load_table("bronze.orders")
    assert _checksum(table) == before and len(_live_files(table)) == 24
    leftovers = find_orphans(table, safety_window=timedelta(days=3), now=datetime.now(UTC))
    assert [f for f in leftovers.young_unreferenced if f.path.endswith(".parquet")]

    # The next night (past the safety window): compaction is done and the crash's files are swept.
    report = maintain_table(table, _options(now=datetime.now(UTC) + timedelta(days=4)))
    assert report.compaction is not None and len(report.compaction.committed) == 1
    assert report.orphans is not None and report.orphans.deleted >= 1
    table = catalog.load_table("bronze.orders")
    assert _checksum(table) == before and len(_live_files(table)) == 1
    assert find_orphans(table, safety_window=timedelta(0), now=datetime.now(UTC) + timedelta(days=5)).orphans == []


def test_crash_after_expiry_commit_leaves_table_readable_and_next_run_deletes_the_files(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=24)
    compact_table(table, small_file_bytes=SMALL, target_file_bytes=TARGET)
    before = _checksum(table)
    now = datetime.now(UTC) + timedelta(seconds=1)

    def crash(_: str) -> None:
        raise Crash("killed between the metadata commit and the file deletes")

    opts = _options(snapshot_retention=timedelta(0), min_snapshots_to_keep=1, now=now)
    with pytest.raises(Crash):
        maintain_table(table, _options(**{**opts.__dict__, "hooks": Hooks(after_expiry_commit=crash)}))

    table = catalog.load_table("bronze.orders")
    assert len(table.metadata.snapshots) <= 2  # expired in metadata (current + today's day-end tag at most)
    assert _checksum(table) == before
    assert _duck_count(table, table.current_snapshot().snapshot_id) == 24 * 20  # type: ignore[union-attr]
    stranded = find_orphans(table, safety_window=timedelta(0), now=now + timedelta(seconds=1)).orphans
    assert len([f for f in stranded if f.path.endswith(".parquet")]) == 24

    report = maintain_table(table, _options(**{**opts.__dict__, "now": datetime.now(UTC) + timedelta(days=4)}))
    assert report.orphans is not None and report.orphans.deleted >= 24
    table = catalog.load_table("bronze.orders")
    assert _checksum(table) == before
    assert find_orphans(table, safety_window=timedelta(0), now=datetime.now(UTC) + timedelta(days=5)).orphans == []


# ------------------------------------------------------------------------------------------------- manifests


def test_manifest_consolidation_reduces_manifests_and_keeps_data(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=30)
    before = _checksum(table)
    assert len(table.current_snapshot().manifests(table.io)) == 30  # type: ignore[union-attr]
    assert not rewrite_manifests(table, max_manifests=40).rewritten

    # The rewrite starts from a stale view (another writer appended since) on a table without pyiceberg
    # retries, like bronze: it must re-plan on the new head and keep the concurrent append.
    with table.transaction() as tx:
        tx.set_properties({"commit.retry.num-retries": "0"})
    append_hour(catalog.load_table("bronze.orders"), DAY1 + timedelta(hours=29, minutes=30), 10)
    result = rewrite_manifests(table, max_manifests=10)

    assert result.rewritten and result.manifests_before == 31 and result.manifests_after <= 2
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary.operation.value == "replace"
    assert snap.summary["total-records"] == str(30 * 20 + 10)
    fresh = catalog.load_table("bronze.orders")
    assert _checksum(fresh, fresh.metadata.snapshots[-3].snapshot_id) == before
    assert len(fresh.scan().to_arrow()) == 30 * 20 + 10
    assert _duck_count(fresh, snap.snapshot_id) == 30 * 20 + 10
    # Partition pruning still works on the consolidated manifests.
    day2 = fresh.scan(row_filter="_arrival_hour >= '2026-11-02T00:00:00'").to_arrow()
    assert len(day2) == 6 * 20 + 10


def test_the_default_threshold_consolidates_a_day_of_hourly_commits(catalog: Catalog, tmp_path: Path) -> None:
    """Each hourly commit adds a manifest and every scan plan opens them all: one night must fold a day's worth."""
    table = _hourly_table(catalog, hours=24)
    options = MaintenanceOptions.from_settings(local_settings(tmp_path))
    result = rewrite_manifests(table, max_manifests=options.max_manifests_per_snapshot)
    assert result.rewritten and result.manifests_before == 24 and result.manifests_after <= 2
    assert _duck_count(catalog.load_table("bronze.orders"), result.snapshot_id) == 24 * 20


# ------------------------------------------------------------------------------------------------- tags, time travel


def test_daily_tags_point_at_the_day_end_snapshot_and_expire(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=2)
    first, second = table.metadata.snapshots
    between = datetime.fromtimestamp((first.timestamp_ms + second.timestamp_ms) / 2000, UTC)
    if first.timestamp_ms != second.timestamp_ms:
        assert snapshot_current_at(table, between) == first.snapshot_id
    today = datetime.now(UTC).date()
    table.manage_snapshots().create_tag(first.snapshot_id, "daily-2020-01-01").commit()

    result = apply_daily_tags(table, now=datetime.now(UTC) + timedelta(days=2), retention_days=365)

    assert result.created == {
        f"daily-{today.isoformat()}": second.snapshot_id,
        f"daily-{(today + timedelta(days=1)).isoformat()}": second.snapshot_id,
    }
    assert result.removed == ["daily-2020-01-01"]
    assert f"daily-{today.isoformat()}" in table.metadata.refs and "daily-2020-01-01" not in table.metadata.refs
    # Idempotent: a second run creates nothing.
    again = apply_daily_tags(table, now=datetime.now(UTC) + timedelta(days=2), retention_days=365)
    assert again.created == {} and again.removed == []
    # The tag protects its snapshot from expiry.
    expire_table(table, retention=timedelta(0), min_keep=1, now=datetime.now(UTC) + timedelta(seconds=1))
    assert table.metadata.snapshot_by_id(second.snapshot_id) is not None


def test_time_travel_by_snapshot_id_tag_and_timestamp(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    table = _hourly_table(catalog, hours=3)
    s1, s2, s3 = table.metadata.snapshots
    table.manage_snapshots().create_tag(s2.snapshot_id, "daily-2026-11-01").commit()
    time.sleep(0.01)
    con = connect()

    for as_of, rows in ((str(s1.snapshot_id), 20), ("daily-2026-11-01", 40), ("2099-01-01T00:00:00Z", 60)):
        resolved, rel = query_as_of(con, table, as_of, "select count(*) from orders")
        assert rel.fetchone()[0] == rows  # type: ignore[index]
        assert len(table.scan(snapshot_id=resolved.snapshot_id).to_arrow()) == rows
    at_s2 = resolve_as_of(table, datetime.fromtimestamp(s2.timestamp_ms / 1000, UTC).isoformat())
    assert at_s2.resolved_from.startswith("timestamp")
    assert at_s2.snapshot_id == (s2.snapshot_id if s3.timestamp_ms > s2.timestamp_ms else s3.snapshot_id)
    with pytest.raises(TimeTravelError, match="no snapshot at"):
        resolve_as_of(table, "2001-01-01")
    with pytest.raises(TimeTravelError, match="not a tag"):
        resolve_as_of(table, "no-such-tag")

    # The CLI reads the same tag through DuckDB.
    from logistics_platform.cli import main

    settings = local_settings(Path(str(table.location()).removeprefix("file://")).parents[2])
    monkeypatch.setenv("ICEBERG_CATALOG_URI", settings.catalog_uri)
    monkeypatch.setenv("ICEBERG_WAREHOUSE", settings.warehouse)
    assert main(["time-travel", "orders", "--as-of", "daily-2026-11-01", "--sql", "select count(*) n from orders"]) == 0
    out = capsys.readouterr().out
    assert f"snapshot {s2.snapshot_id}" in out and "\n40" in out


def test_health_reports_small_files_snapshots_manifests_and_orphans(catalog: Catalog) -> None:
    table = _hourly_table(catalog, hours=30)
    stray = Path(table.location().removeprefix("file://")) / "data" / "stray.parquet"
    stray.write_bytes(b"y" * 123)
    h = table_health(table, small_file_bytes=SMALL, now=datetime.now(UTC) + timedelta(seconds=1))
    assert h.data_files == 30 and h.small_files == 30 and h.snapshots == 30 and h.manifests_current == 30
    assert [(p.partition, p.files) for p in h.partitions] == [
        ("_arrival_hour_day=2026-11-01", 24),
        ("_arrival_hour_day=2026-11-02", 6),
    ]
    assert h.worst_partition() is not None and h.worst_partition().small_files == 24  # type: ignore[union-attr]
    assert h.orphan_files == 1 and h.orphan_bytes == 123


# ------------------------------------------------------------------------------------------------- dagster, CLI


def test_maintenance_job_runs_in_dagster_and_reports(tmp_path: Path) -> None:
    import dagster as dg

    from logistics_platform.defs.maintenance import build_defs

    settings = local_settings(tmp_path, compaction_small_file_bytes=SMALL, compaction_target_file_bytes=TARGET)
    catalog = load_catalog(settings)
    _hourly_table(catalog, hours=30)
    defs = dg.Definitions.merge(build_defs(settings), dg.Definitions(resources=build_resources(settings)))
    schedule = defs.resolve_schedule_def("nightly_maintenance_schedule")
    assert schedule.cron_schedule == "0 2 * * *" and schedule.execution_timezone == "UTC"

    result = defs.resolve_job_def("lakehouse_maintenance").execute_in_process()

    assert result.success
    (mat,) = result.get_asset_materialization_events()
    md = {k: v.value for k, v in mat.materialization.metadata.items()}
    assert md["files_before"] == 30 and md["files_after"] == 2 and md["files_rewritten"] == 30
    for key in ("snapshots_expired", "bytes_reclaimed", "orphan_files_removed", "duration_s", "bytes_before"):
        assert key in md
    checks = {tuple(e.asset_key.path): e for e in result.get_asset_check_evaluations()}
    assert checks[("bronze", "orders")].passed
    assert checks[("bronze", "orders")].metadata["data_files"].value == 2
    assert checks[("bronze", "payments")].passed  # not created yet: reported, not failed
    assert result.dagster_run.tags.get("logistics/writer") == "maintenance"
    assert len(catalog.load_table("bronze.orders").scan().to_arrow()) == 30 * 20


def test_maintain_cli_dry_run_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from logistics_platform.cli import main

    settings = local_settings(tmp_path)
    table = _hourly_table(load_catalog(settings), hours=26)
    monkeypatch.setenv("ICEBERG_CATALOG_URI", settings.catalog_uri)
    monkeypatch.setenv("ICEBERG_WAREHOUSE", settings.warehouse)
    monkeypatch.setenv("COMPACTION_SMALL_FILE_BYTES", str(SMALL))
    monkeypatch.setenv("COMPACTION_TARGET_FILE_BYTES", str(TARGET))
    io = pyarrow_io(table)
    listing = sorted((f.path, f.size) for f in list_files(io, table.location()))
    snapshot = table.current_snapshot().snapshot_id  # type: ignore[union-attr]

    assert main(["maintain", "--dry-run", "--table", "orders"]) == 0

    out = capsys.readouterr().out
    assert "DRY RUN" in out and "bronze.orders" in out and "26 -> 2" in out
    assert "would compact bronze.orders _arrival_hour_day=2026-11-01: 24 files" in out
    assert sorted((f.path, f.size) for f in list_files(io, table.location())) == listing
    assert catalog_snapshot(settings) == snapshot
    assert main(["maintain", "--table", "nope"]) == 2


def catalog_snapshot(settings) -> int:  # type: ignore[no-untyped-def]
    return load_catalog(settings).load_table("bronze.orders").current_snapshot().snapshot_id  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------------- real pipeline


def test_real_ingest_then_maintenance_then_reingest_of_one_hour(tmp_path: Path) -> None:
    """Bronze from the real ingest: maintenance keeps every table identical; a re-ingest still replaces one hour."""
    from logistics_platform.generator import GeneratorConfig, generate
    from logistics_platform.lib.bronze.ingest import ingest_hour

    settings = local_settings(tmp_path)
    start = datetime(2026, 11, 2, 8)
    generate(
        settings.landing_dir,
        GeneratorConfig.clean(start, hours=4, seed=5, orders_per_day=600, pings_per_day=1200, tenants=3, couriers=10),
    )
    for h in range(4):
        ingest_hour(settings, start + timedelta(hours=h))
    catalog = load_catalog(settings)
    idents = [f"bronze.{t}" for t in ("orders", "payments", "tracking_pings", "ingest_log")]
    before = {i: _checksum(catalog.load_table(i)) for i in idents}

    from logistics_platform.lib.maintenance import maintain_catalog

    reports = maintain_catalog(catalog, _options(now=datetime.now(UTC) + timedelta(seconds=1)))

    assert not [r.error for r in reports if r.error]
    by_table = {r.table: r for r in reports}
    assert by_table["bronze.orders"].compaction is not None and by_table["bronze.orders"].compaction.committed
    for ident in idents:
        table = catalog.load_table(ident)
        assert _checksum(table) == before[ident], ident
        assert len(_live_files(table)) < by_table[ident].before.data_files  # type: ignore[union-attr]

    ingest_hour(settings, start + timedelta(hours=2))  # re-ingest one hour of the compacted day

    for ident in idents[:3]:
        assert _checksum(catalog.load_table(ident)) == before[ident], ident
    hour_rows_now = catalog.load_table("bronze.orders").scan(
        row_filter=EqualTo("_arrival_hour", (start + timedelta(hours=2)).isoformat())
    )
    assert len(hour_rows_now.to_arrow()) > 0
