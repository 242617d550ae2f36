"""What the platform relies on from pyiceberg's internals (lib/iceberg_internals.py), on a real SQLite catalog and
real files: written data files describe their rows, a rewrite deletes and adds in one REPLACE snapshot, a manifest
rewrite keeps every live file. A pyiceberg upgrade that changes any of it fails here first."""

from __future__ import annotations

from datetime import datetime, timedelta

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import ValidationException
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.manifest import DataFile, ManifestEntry, ManifestEntryStatus
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.types import TimestampType

from logistics_platform.lib.iceberg_internals import (
    ManifestRewrite,
    RewriteFiles,
    arrow_to_data_files,
    split_by_partition,
    transaction,
)
from logistics_platform.lib.maintenance.compaction import row_checksum
from logistics_platform.lib.timekeys import epoch_micros
from tests.support.synthetic import append_hour, create_bronze_table, hour_rows, replace_hour

DAY1 = datetime(2026, 11, 1)
DAY2 = DAY1 + timedelta(days=1)


def _days(day: datetime) -> int:
    """The day transform's value of ``day``: days since 1970-01-01."""
    return (day - datetime(1970, 1, 1)).days


def _live(table: Table) -> dict[str, DataFile]:
    return {t.file.file_path: t.file for t in table.scan().plan_files()}


def _append(table: Table, files: list[DataFile]) -> None:
    with table.transaction() as tx, tx.update_snapshot().fast_append() as fa:
        for f in files:
            fa.append_data_file(f)


def test_written_data_files_describe_their_rows_and_commit_nothing(catalog: Catalog) -> None:
    table = create_bronze_table(catalog)
    first, second = DAY1 + timedelta(hours=10), DAY2 + timedelta(hours=7)
    rows = pa.concat_tables([hour_rows(table, first, 30, seed=1), hour_rows(table, second, 20, seed=2)])

    files = arrow_to_data_files(table.metadata, table.io, rows)

    # One file per day partition, carrying the partition value, the row count and the hour column's metrics
    # (commit.hour_files decides from these bounds whether a file holds nothing but one hour).
    hour_id = table.schema().find_field("_arrival_hour").field_id
    by_day = {f.partition[0]: f for f in files}
    assert sorted(by_day) == [_days(DAY1), _days(DAY2)] and len(files) == 2
    for day, hour, count in ((DAY1, first, 30), (DAY2, second, 20)):
        f = by_day[_days(day)]
        assert f.record_count == count and f.file_size_in_bytes > 0
        assert f.value_counts[hour_id] == count and f.null_value_counts[hour_id] == 0
        assert from_bytes(TimestampType(), f.lower_bounds[hour_id]) == epoch_micros(hour)
        assert from_bytes(TimestampType(), f.upper_bounds[hour_id]) == epoch_micros(hour)
        assert f"_arrival_hour_day={day:%Y-%m-%d}/" in f.file_path and table.io.new_input(f.file_path).exists()
    # Written, not committed: the table has no snapshot until the files are appended.
    assert catalog.load_table("bronze.orders").current_snapshot() is None

    _append(table, files)
    table = catalog.load_table("bronze.orders")
    assert row_checksum(table.scan().to_arrow()) == row_checksum(rows)
    # Partition values and metrics prune: a scan of one hour plans exactly that hour's file.
    planned = [
        t.file.file_path for t in table.scan(row_filter=EqualTo("_arrival_hour", first.isoformat())).plan_files()
    ]
    assert planned == [by_day[_days(DAY1)].file_path]


def test_rows_split_by_partition_carry_their_partition_key(catalog: Catalog) -> None:
    table = create_bronze_table(catalog)
    hours = ((DAY1 + timedelta(hours=3), 4), (DAY2, 6), (DAY1 + timedelta(hours=5), 5))  # interleaved days
    rows = pa.concat_tables([hour_rows(table, hour, n, seed=n) for hour, n in hours])

    parts = {key.to_path(): (key, part) for key, part in split_by_partition(table.spec(), table.schema(), rows)}

    assert sorted(parts) == ["_arrival_hour_day=2026-11-01", "_arrival_hour_day=2026-11-02"]
    key, part = parts["_arrival_hour_day=2026-11-01"]
    assert key.partition[0] == _days(DAY1) and part.num_rows == 9
    assert set(part.column("_arrival_hour").to_pylist()) == {DAY1 + timedelta(hours=3), DAY1 + timedelta(hours=5)}
    assert parts["_arrival_hour_day=2026-11-02"][1].num_rows == 6


def _day_table(catalog: Catalog, hours: int = 3) -> Table:
    table = create_bronze_table(catalog)
    for h in range(hours):
        append_hour(table, DAY1 + timedelta(hours=h), 10, seed=h)
    return catalog.load_table("bronze.orders")


def test_rewrite_deletes_and_adds_in_one_replace_snapshot(catalog: Catalog) -> None:
    table = _day_table(catalog)
    old = _live(table)
    before = row_checksum(table.scan().to_arrow())
    snapshots = len(table.snapshots())
    # A concurrent append (another hour) after this writer loaded the table: no conflict for a rewrite.
    append_hour(catalog.load_table("bronze.orders"), DAY1 + timedelta(hours=9), 4, seed=9)
    new = arrow_to_data_files(table.metadata, table.io, table.scan().to_arrow())

    tx = table.transaction()
    rewrite = RewriteFiles(tx, table.io, {"logistics.test": "rewrite"})
    for f in old.values():
        rewrite.delete_data_file(f)
    for f in new:
        rewrite.append_data_file(f)
    rewrite.commit()
    tx.commit_transaction()

    table = catalog.load_table("bronze.orders")
    snap = table.current_snapshot()
    assert snap is not None and snap.snapshot_id == rewrite.snapshot_id
    assert len(table.snapshots()) == snapshots + 2  # the concurrent append, then ONE snapshot for the rewrite
    assert snap.summary is not None and snap.summary.operation == Operation.REPLACE
    assert snap.summary["logistics.test"] == "rewrite"
    assert (snap.summary["deleted-data-files"], snap.summary["added-data-files"]) == ("3", "1")
    live = _live(table)
    assert not set(old) & set(live) and {f.file_path for f in new} < set(live) and len(live) == 2
    hour9 = (DAY1 + timedelta(hours=9)).isoformat()
    assert table.scan(row_filter=EqualTo("_arrival_hour", hour9)).to_arrow().num_rows == 4  # the append survived
    assert row_checksum(table.scan(row_filter=LessThan("_arrival_hour", hour9)).to_arrow()) == before


def test_rewrite_of_a_file_no_longer_live_fails_and_changes_nothing(catalog: Catalog) -> None:
    table = _day_table(catalog)
    old = list(_live(table).values())
    new = arrow_to_data_files(table.metadata, table.io, table.scan().to_arrow())
    # Another writer replaces hour 0 after this one planned: one of the files being rewritten is gone.
    replace_hour(catalog.load_table("bronze.orders"), DAY1, 5, seed=7)
    head = catalog.load_table("bronze.orders").current_snapshot()

    tx = table.transaction()
    rewrite = RewriteFiles(tx, table.io, {})
    for f in old:
        rewrite.delete_data_file(f)
    for f in new:
        rewrite.append_data_file(f)
    with pytest.raises(ValidationException, match="Missing required files to delete"):
        rewrite.commit()
        tx.commit_transaction()

    after = catalog.load_table("bronze.orders").current_snapshot()
    assert head is not None and after is not None and after.snapshot_id == head.snapshot_id


def _entries(table: Table) -> dict[str, ManifestEntry]:
    snap = table.current_snapshot()
    assert snap is not None
    return {
        e.data_file.file_path: e
        for m in snap.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
    }


def test_manifest_rewrite_keeps_every_live_file_as_existing(catalog: Catalog) -> None:
    table = create_bronze_table(catalog)
    for h in range(12):
        append_hour(table, DAY1 + timedelta(hours=3 * h), 5, seed=h)  # 12 manifests over two days
    replace_hour(table, DAY1 + timedelta(hours=3), 3, seed=99)  # leaves a DELETED entry, which the rewrite drops
    table = catalog.load_table("bronze.orders")
    parent = table.current_snapshot()
    assert parent is not None and parent.summary is not None
    manifests_before = parent.manifests(table.io)
    entries_before = _entries(table)
    rows_before = row_checksum(table.scan().to_arrow())
    planned: list[tuple[int, int, int]] = []

    def in_fives(
        spec: PartitionSpec, schema: Schema, entries: list[ManifestEntry], nbytes: int
    ) -> list[list[ManifestEntry]]:
        planned.append((spec.spec_id, len(entries), nbytes))
        ordered = sorted(entries, key=lambda e: e.data_file.file_path)
        return [ordered[i : i + 5] for i in range(0, len(ordered), 5)]

    tx = table.transaction()
    rewrite = ManifestRewrite(tx, table.io, {"logistics.test": "manifests"}, in_fives)
    rewrite.commit()
    tx.commit_transaction()

    table = catalog.load_table("bronze.orders")
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.snapshot_id == rewrite.snapshot_id
    assert snap.summary.operation == Operation.REPLACE and snap.summary["logistics.test"] == "manifests"
    live = len(entries_before)
    assert planned == [(table.spec().spec_id, live, sum(m.manifest_length for m in manifests_before))]
    assert len(snap.manifests(table.io)) == -(-live // 5) < len(manifests_before)
    assert snap.summary["manifests-replaced"] == str(len(manifests_before))
    assert snap.summary["manifests-created"] == str(-(-live // 5))
    for key in ("total-records", "total-data-files", "total-files-size"):
        assert snap.summary[key] == parent.summary[key]
    # Every live file kept, as EXISTING, with the sequence numbers it had (which delete files apply to it).
    entries_after = _entries(table)
    assert set(entries_after) == set(entries_before)
    for path, e in entries_after.items():
        assert e.status == ManifestEntryStatus.EXISTING
        was = entries_before[path]
        assert (e.snapshot_id, e.sequence_number, e.file_sequence_number) == (
            was.snapshot_id,
            was.sequence_number,
            was.file_sequence_number,
        )
    assert row_checksum(table.scan().to_arrow()) == rows_before


def test_a_transaction_stages_what_pyiceberg_stages_and_computes_it_once_per_staged_state(catalog: Catalog) -> None:
    table = create_bronze_table(catalog)
    for hour in range(3):
        append_hour(table, DAY1 + timedelta(hours=hour), 10, seed=hour)
    files = arrow_to_data_files(table.metadata, table.io, hour_rows(table, DAY1 + timedelta(hours=5), 10))

    ours, theirs = transaction(table), table.transaction()
    # Nothing staged: the table's own metadata, not a copy (pyiceberg's own deep-copies it on each read).
    assert ours.table_metadata is table.metadata and theirs.table_metadata is not theirs.table_metadata
    for tx in (ours, theirs):
        tx.set_properties({"logistics.test": "1"})
        with tx.update_snapshot(snapshot_properties={"run": "r"}).fast_append() as fa:
            for f in files:
                fa.append_data_file(f)
    # Each stage is seen at once and computed once, and the staged metadata equals pyiceberg's own (the timestamps
    # aside).
    staged, expected = ours.table_metadata, theirs.table_metadata
    assert ours.table_metadata is staged and staged is not table.metadata
    assert staged.properties["logistics.test"] == "1" and len(staged.snapshots) == 4
    ignore = {"last_updated_ms"}
    snaps = [s.model_dump(exclude={"snapshot_id", "timestamp_ms", "manifest_list"}) for s in staged.snapshots]
    assert snaps == [s.model_dump(exclude={"snapshot_id", "timestamp_ms", "manifest_list"}) for s in expected.snapshots]
    assert staged.model_dump(exclude={"snapshots", "refs", "snapshot_log", "current_snapshot_id", *ignore}) == (
        expected.model_dump(exclude={"snapshots", "refs", "snapshot_log", "current_snapshot_id", *ignore})
    )
    # It commits like pyiceberg's, and after the commit reads the table's new metadata.
    ours.commit_transaction()
    table = catalog.load_table("bronze.orders")
    assert len(table.metadata.snapshots) == 4 and table.properties["logistics.test"] == "1"
    assert (
        table.scan().to_arrow().num_rows == 40
        and ours.table_metadata.current_snapshot_id == table.metadata.current_snapshot_id
    )
