"""Bin-packing compaction of small data files: checksummed rewrites, one REPLACE commit per table."""

from __future__ import annotations

import itertools
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

from logistics_platform.lib.iceberg_internals import RewriteFiles, split_by_partition
from logistics_platform.lib.maintenance.files import pyarrow_io

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
    con = duckdb.connect()
    try:
        con.register("rows_in", rows)
        args = ", ".join('"' + n.replace('"', '""') + '"' for n in rows.column_names)
        count, total = con.execute(
            f"select count(*), coalesce(sum(hash({args})::hugeint), 0) % {2**64} from rows_in"
        ).fetchone()  # type: ignore[misc]
    finally:
        con.close()
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
    order = table.sort_order()
    keys: list[tuple[str, str, str]] = []
    schema = table.schema()
    for f in order.fields:
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
    io = pyarrow_io(table)
    md = table.metadata
    task_schema = pyarrow_to_schema(
        rows.schema, name_mapping=md.schema().name_mapping, format_version=md.format_version
    )
    write_uuid = uuid.uuid4()
    counter = itertools.count(0)
    spec = md.spec()
    parts: list[tuple[PartitionKey | None, pa.Table]]
    if spec.is_unpartitioned():
        parts = [(None, rows)]
    else:
        parts = list(split_by_partition(spec, md.schema(), rows))
        if len(parts) != 1:
            raise CompactionError(f"a compaction bin spans {len(parts)} partitions; expected exactly one")
    tasks = []
    for key, part in parts:
        for start in range(0, part.num_rows, rows_per_file):
            chunk = part.slice(start, rows_per_file)
            tasks.append(
                WriteTask(
                    write_uuid=write_uuid,
                    task_id=next(counter),
                    schema=task_schema,
                    record_batches=chunk.to_batches(),
                    partition_key=key,
                    sort_order_id=table.sort_order().order_id,
                )
            )
    written = list(write_file(io=io, table_metadata=md, tasks=iter(tasks)))
    for f in written:
        f.spec_id = md.default_spec_id  # not part of the file's struct; readers and the commit need it
    return written


def _delete_written(table: Table, files: list[DataFile]) -> None:
    io = pyarrow_io(table)
    for f in files:
        try:
            io.delete(f.file_path)
        except OSError as exc:  # left for the orphan sweep
            log.warning("could not delete uncommitted compaction file %s: %s", f.file_path, exc)


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
    pending: list[_Rewrite] = []
    try:
        for label, (_, small, has_deletes) in sorted(plan_partitions(table, small_file_bytes).items()):
            bins = _bins(small, target_file_bytes)
            if not bins:
                continue
            chosen = [f for b in bins for f in b]
            pc = PartitionCompaction(label, len(chosen), sum(f.file_size_in_bytes for f in chosen))
            result.partitions.append(pc)
            if has_deletes:
                pc.status = "skipped: partition has delete files (merge-on-read); rewrite them first"
                continue
            if dry_run:
                pc.status, pc.files_after = "dry-run", len(bins)
                continue
            if progress:
                progress(f"{name} {label}: rewriting {len(chosen)} files into ~{len(bins)}")
            pending.append(_rewrite_partition(table, pc, bins, target_file_bytes))
    except BaseException:
        # Nothing was committed: every file written so far is unreferenced.
        for rw in pending:
            _delete_written(table, rw.new_files)
        raise
    if pending:
        if before_commit:
            before_commit(name)  # a raise here is a crash: the written files stay behind as young orphans
        _commit_rewrites(table, pending)
    return result


@dataclass
class _Rewrite:
    pc: PartitionCompaction
    old_files: list[DataFile]
    new_files: list[DataFile]


def _rewrite_partition(
    table: Table, pc: PartitionCompaction, bins: list[list[DataFile]], target_file_bytes: int
) -> _Rewrite:
    """Write the compacted files of one partition and prove they hold the same rows; commits nothing."""
    name = ".".join(table.name())
    rw = _Rewrite(pc, [f for b in bins for f in b], [])
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
            rw.new_files.extend(written)
            sums_out.append(row_checksum(_read(table, written)))
    except BaseException:
        _delete_written(table, rw.new_files)
        raise
    pc.checksum_before = _combine(sums_in)
    pc.checksum_after = _combine(sums_out)
    pc.files_after = len(rw.new_files)
    if pc.checksum_before != pc.checksum_after:
        _delete_written(table, rw.new_files)
        raise CompactionError(
            f"{name} {pc.partition}: rows read back after rewrite differ (checksum {pc.checksum_before} before, "
            f"{pc.checksum_after} after); nothing was committed. Check the table's schema and the pyarrow version."
        )
    return rw


def _commit_rewrites(table: Table, pending: list[_Rewrite]) -> None:
    """One REPLACE commit for all partitions; on conflict, drop the partitions whose files are gone and retry."""
    name = ".".join(table.name())
    remaining = list(pending)
    for attempt in range(1, MAX_OUTER_ATTEMPTS + 1):
        for rw in remaining:
            rw.pc.attempts = attempt
        props = {
            SNAPSHOT_PROP_KIND: "compaction",
            "logistics.compaction.partitions": str(len(remaining)),
            "logistics.compaction.files-replaced": str(sum(len(rw.old_files) for rw in remaining)),
            "logistics.compaction.rows-checksum": _combine([rw.pc.checksum_after for rw in remaining]),
            "logistics.compaction.partition-checksums": json.dumps(
                {rw.pc.partition: rw.pc.checksum_after for rw in remaining}, sort_keys=True
            ),
        }
        tx = table.transaction()
        producer = RewriteFiles(tx, table.io, props)
        try:
            for rw in remaining:
                for f in rw.old_files:
                    producer.delete_data_file(f)
                for f in rw.new_files:
                    producer.append_data_file(f)
            producer.commit()
            tx.commit_transaction()
        except (ValidationException, CommitFailedException) as exc:
            # Either way the commit did not land. Keep the partitions whose inputs are all still live.
            table.refresh()
            live = {t.file.file_path for t in table.scan().plan_files()}
            still: list[_Rewrite] = []
            for rw in remaining:
                if {f.file_path for f in rw.old_files} <= live:
                    still.append(rw)
                else:
                    _delete_written(table, rw.new_files)
                    rw.pc.status = "skipped: a file being rewritten was replaced concurrently (re-ingest?)"
            log.warning("%s: compaction commit conflict (%s); %d partition(s) left to retry", name, exc, len(still))
            remaining = still
            if not remaining:
                return
            if attempt < MAX_OUTER_ATTEMPTS:
                backoff(attempt)
            continue
        for rw in remaining:
            rw.pc.status = "committed"
        return
    for rw in remaining:
        _delete_written(table, rw.new_files)
        rw.pc.status = f"skipped: commit kept conflicting after {MAX_OUTER_ATTEMPTS} attempts"


def _combine(parts: list[str]) -> str:
    """Checksums of disjoint row sets add up (count and hash sum), so bins combine into one partition checksum."""
    count, total = 0, 0
    for p in parts:
        c, h = p.split(":")
        count += int(c)
        total = (total + int(h, 16)) % 2**64
    return f"{count}:{total:016x}"
