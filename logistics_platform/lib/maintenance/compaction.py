"""Bin-packing compaction of small data files: checksummed rewrites, one REPLACE commit per table."""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, pyarrow_to_schema, write_file
from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionKey
from pyiceberg.table import FileScanTask, Table, WriteTask
from pyiceberg.table.sorting import NullOrder, SortDirection
from pyiceberg.transforms import IdentityTransform

from logistics_platform.lib.iceberg_internals import RewriteFiles, split_by_partition, transaction
from logistics_platform.lib.maintenance.files import delete_files, normalize, pyarrow_io

log = logging.getLogger(__name__)

SNAPSHOT_PROP_KIND = "logistics.maintenance"
# Our own retries on top of pyiceberg's (bronze tables set commit.retry.num-retries=0: each writer re-plans).
MAX_OUTER_ATTEMPTS = 5


def backoff(attempt: int) -> None:
    """Sleep before retry ``attempt`` + 1: exponential with jitter, so racing writers do not collide again."""
    time.sleep(min(2.0, 0.05 * 2**attempt) * (0.5 + random.random()))


def row_checksum(rows: pa.Table) -> str:
    """``<row count>:<sum of row hashes mod 2^64 in hex>``: order-independent, duplicate rows count (a sum, not xor)."""
    if rows.num_columns == 0:
        return f"{rows.num_rows}:0"
    with duckdb.connect() as con:
        con.register("rows_in", rows)
        args = ", ".join('"' + n.replace('"', '""') + '"' for n in rows.column_names)
        count, total = con.execute(
            f"select count(*), coalesce(sum(hash({args})::hugeint), 0) % {2**64} from rows_in"
        ).fetchone()  # type: ignore[misc]
    return f"{count}:{int(total):016x}"


class CompactionError(RuntimeError):
    """A rewrite would change data (checksum mismatch); nothing was committed."""


@dataclass
class PartitionCompaction:
    """What happened to one partition."""

    partition: str
    files_before: int  # files rewritten
    bytes_before: int
    files_after: int = 0
    checksum_before: str = ""
    checksum_after: str = ""
    status: str = "planned"  # committed | dry-run | skipped: <reason>
    attempts: int = 0
    old_files: list[DataFile] = field(default_factory=list, repr=False)  # the files it rewrites
    new_files: list[DataFile] = field(default_factory=list, repr=False)  # written; live only once committed


@dataclass
class CompactionResult:
    table: str
    partitions: list[PartitionCompaction] = field(default_factory=list)

    @property
    def committed(self) -> list[PartitionCompaction]:
        return [p for p in self.partitions if p.status == "committed"]

    @property
    def files_rewritten(self) -> int:
        return sum(p.files_before for p in self.committed)

    @property
    def files_written(self) -> int:
        return sum(p.files_after for p in self.committed)


def _bins(files: list[DataFile], target_bytes: int) -> list[list[DataFile]]:
    """First-fit decreasing bin packing by file size; bins of a single file are dropped (nothing to merge)."""
    bins: list[tuple[int, list[DataFile]]] = []
    for f in sorted(files, key=lambda d: d.file_size_in_bytes, reverse=True):
        for i, (size, members) in enumerate(bins):
            if size + f.file_size_in_bytes <= target_bytes:
                members.append(f)
                bins[i] = (size + f.file_size_in_bytes, members)
                break
        else:
            bins.append((f.file_size_in_bytes, [f]))
    return [members for _, members in bins if len(members) > 1]


def _sort_keys(table: Table) -> list[tuple[str, str, str]]:
    keys: list[tuple[str, str, str]] = []
    schema = table.schema()
    for f in table.sort_order().fields:
        if not isinstance(f.transform, IdentityTransform):
            break  # a transformed sort key cannot be applied by a plain column sort; keep the prefix
        name = schema.find_column_name(f.source_id)
        if name is None:
            break
        direction = "ascending" if f.direction == SortDirection.ASC else "descending"
        keys.append((name, direction, "at_start" if f.null_order == NullOrder.NULLS_FIRST else "at_end"))
    return keys


def _read(table: Table, files: list[DataFile]) -> pa.Table:
    scan = ArrowScan(table.metadata, pyarrow_io(table), table.schema(), AlwaysTrue())
    return scan.to_table([FileScanTask(f) for f in files])


def _write(table: Table, rows: pa.Table, rows_per_file: int) -> list[DataFile]:
    md = table.metadata
    schema = pyarrow_to_schema(rows.schema, name_mapping=md.schema().name_mapping, format_version=md.format_version)
    key: PartitionKey | None = None
    if not md.spec().is_unpartitioned():
        parts = split_by_partition(md.spec(), md.schema(), rows)
        if len(parts) != 1:
            raise CompactionError(f"a compaction bin spans {len(parts)} partitions; expected exactly one")
        key, rows = parts[0]
    write_uuid, order_id = uuid.uuid4(), table.sort_order().order_id
    tasks = (
        WriteTask(write_uuid, i, schema, rows.slice(start, rows_per_file).to_batches(), order_id, key)
        for i, start in enumerate(range(0, rows.num_rows, rows_per_file))
    )
    written = list(write_file(io=pyarrow_io(table), table_metadata=md, tasks=tasks))
    for f in written:
        f.spec_id = md.default_spec_id  # not part of the file's struct; readers and the commit need it
    return written


def _delete_written(table: Table, files: list[DataFile]) -> None:
    io = pyarrow_io(table)  # a file that cannot be deleted is left for the orphan sweep
    delete_files(io, table.location(), [normalize(io, f.file_path) for f in files])


def plan_partitions(table: Table, small_file_bytes: int) -> dict[str, tuple[list[DataFile], list[DataFile], bool]]:
    """partition label -> (all live data files, small ones of the default spec, has delete files)."""
    out: dict[str, tuple[list[DataFile], list[DataFile], bool]] = {}
    md = table.metadata
    schema = md.schema()
    default_spec_id = md.default_spec_id
    for task in table.scan().plan_files():  # the current snapshot's; none without one
        f = task.file
        spec = md.specs()[f.spec_id]
        label = spec.partition_to_path(f.partition, schema) if not spec.is_unpartitioned() else "(unpartitioned)"
        if f.spec_id != default_spec_id:
            label = f"spec{f.spec_id}:{label}"
        all_files, small, _ = out.setdefault(label, ([], [], False))
        all_files.append(f)
        if f.spec_id == default_spec_id and f.file_size_in_bytes < small_file_bytes:
            small.append(f)
        if task.delete_files:
            out[label] = (all_files, small, True)
    return out


def compact_table(
    table: Table,
    *,
    small_file_bytes: int,
    target_file_bytes: int,
    dry_run: bool = False,
    before_commit: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> CompactionResult:
    """Compact every partition of ``table`` with at least two small files: rewrite all, then commit once."""
    name = ".".join(table.name())
    result = CompactionResult(table=name)
    pending: list[PartitionCompaction] = []
    try:
        for label, (_, small, has_deletes) in sorted(plan_partitions(table, small_file_bytes).items()):
            bins = _bins(small, target_file_bytes)
            if not bins:
                continue
            chosen = [f for b in bins for f in b]
            pc = PartitionCompaction(label, len(chosen), sum(f.file_size_in_bytes for f in chosen), old_files=chosen)
            result.partitions.append(pc)
            if has_deletes:
                pc.status = "skipped: partition has delete files (merge-on-read); rewrite them first"
                continue
            if dry_run:
                pc.status, pc.files_after = "dry-run", len(bins)
                continue
            if progress:
                progress(f"{name} {label}: rewriting {len(chosen)} files into ~{len(bins)}")
            _rewrite_partition(table, pc, bins, target_file_bytes)
            pending.append(pc)
    except BaseException:
        # Nothing was committed: every file written so far is unreferenced.
        for pc in pending:
            _delete_written(table, pc.new_files)
        raise
    if pending:
        if before_commit:
            before_commit(name)  # a raise here is a crash: the written files stay behind as young orphans
        _commit_rewrites(table, pending)
    return result


def _rewrite_partition(
    table: Table, pc: PartitionCompaction, bins: list[list[DataFile]], target_file_bytes: int
) -> None:
    """Write the compacted files of one partition and prove they hold the same rows; commits nothing."""
    name = ".".join(table.name())
    sums_in: list[str] = []
    sums_out: list[str] = []
    keys = _sort_keys(table)
    try:
        for b in bins:
            rows = _read(table, b)
            sums_in.append(row_checksum(rows))
            if keys:
                rows = rows.sort_by(keys)
            in_bytes = sum(f.file_size_in_bytes for f in b)
            # Size output files by the on-disk bytes per row of the inputs: the target is an on-disk size.
            rows_per_file = max(1, int(target_file_bytes * rows.num_rows / max(in_bytes, 1)))
            written = _write(table, rows, rows_per_file)
            pc.new_files.extend(written)
            sums_out.append(row_checksum(_read(table, written)))
    except BaseException:
        _delete_written(table, pc.new_files)
        raise
    pc.checksum_before = _combine(sums_in)
    pc.checksum_after = _combine(sums_out)
    pc.files_after = len(pc.new_files)
    if pc.checksum_before != pc.checksum_after:
        _delete_written(table, pc.new_files)
        raise CompactionError(
            f"{name} {pc.partition}: rows read back after rewrite differ (checksum {pc.checksum_before} before, "
            f"{pc.checksum_after} after); nothing was committed. Check the table's schema and the pyarrow version."
        )


def _commit_rewrites(table: Table, pending: list[PartitionCompaction]) -> None:
    """One REPLACE commit for all partitions; on conflict, drop the partitions whose files are gone and retry."""
    name = ".".join(table.name())
    remaining = list(pending)
    for attempt in range(1, MAX_OUTER_ATTEMPTS + 1):
        for pc in remaining:
            pc.attempts = attempt
        props = {
            SNAPSHOT_PROP_KIND: "compaction",
            "logistics.compaction.partitions": str(len(remaining)),
            "logistics.compaction.files-replaced": str(sum(len(pc.old_files) for pc in remaining)),
            "logistics.compaction.rows-checksum": _combine([pc.checksum_after for pc in remaining]),
            "logistics.compaction.partition-checksums": json.dumps(
                {pc.partition: pc.checksum_after for pc in remaining}, sort_keys=True
            ),
        }
        tx = transaction(table)
        producer = RewriteFiles(tx, table.io, props)
        try:
            for pc in remaining:
                for f in pc.old_files:
                    producer.delete_data_file(f)
                for f in pc.new_files:
                    producer.append_data_file(f)
            producer.commit()
            tx.commit_transaction()
        except (ValidationException, CommitFailedException) as exc:
            # Either way the commit did not land. Keep the partitions whose inputs are all still live.
            table.refresh()
            live = {t.file.file_path for t in table.scan().plan_files()}
            for pc in remaining:
                if not {f.file_path for f in pc.old_files} <= live:
                    _delete_written(table, pc.new_files)
                    pc.status = "skipped: a file being rewritten was replaced concurrently (re-ingest?)"
            remaining = [pc for pc in remaining if pc.status == "planned"]
            log.warning("%s: compaction commit conflict (%s); %d partition(s) left to retry", name, exc, len(remaining))
            if not remaining:
                return
            if attempt < MAX_OUTER_ATTEMPTS:
                backoff(attempt)
        else:
            for pc in remaining:
                pc.status = "committed"
            return
    for pc in remaining:
        _delete_written(table, pc.new_files)
        pc.status = f"skipped: commit kept conflicting after {MAX_OUTER_ATTEMPTS} attempts"


def _combine(parts: list[str]) -> str:
    """Checksums of disjoint row sets add up (count and hash sum), so bins combine into one partition checksum."""
    count, total = 0, 0
    for p in parts:
        c, h = p.split(":")
        count += int(c)
        total = (total + int(h, 16)) % 2**64
    return f"{count}:{total:016x}"
