"""The one module that uses pyiceberg internals (underscore names), each behind a public function or class.

pyiceberg 0.12's public API has no "write data files, commit later", no REPLACE commit of given files and no manifest
rewrite, and its transactions recompute their metadata on every read; each use below says why and what would replace
it. ``tests/test_iceberg_internals.py`` pins what the platform relies on, and ``tests/test_architecture.py`` fails on
a private pyiceberg import anywhere else.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from datetime import datetime

import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import _dataframe_to_data_files, _determine_partitions
from pyiceberg.manifest import DataFile, ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.partitioning import PartitionKey, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import TableUpdate, _apply_table_update, _TableMetadataUpdateContext
from pyiceberg.table.update.snapshot import _OverwriteFiles, _SnapshotProducer
from pyiceberg.table.update.validate import _validate_no_new_deletes_for_data_files
from pyiceberg.utils.datetime import datetime_to_millis

ManifestPlanner = Callable[[PartitionSpec, Schema, list[ManifestEntry], int], list[list[ManifestEntry]]]
"""(spec, schema, the live entries of that spec's data manifests, those manifests' bytes) -> the entries of each
new manifest, in order."""


# ------------------------------------------------------------------------------------------------- transactions
class _MemoTransaction(Transaction):
    """A transaction that computes its staged metadata once per staged state.

    pyiceberg 0.12's ``Transaction.table_metadata`` replays the staged updates and deep-copies the whole metadata,
    every snapshot kept included, on each read, and one snapshot commit reads it about 16 times: a commit's cost then
    grows with the table's history (iceberg-python#2673). Upstream's approved fix (#3302, carried on as #3784) caches
    the result keyed on the identity of the table's metadata and of the staged-updates tuple, which every stage
    rebinds; this is that, until a pyiceberg release has it.

    It also skips the deep copy that ``update_table_metadata`` ends with, which alone grows with every snapshot kept:
    each update is applied by pyiceberg's own ``_apply_table_update`` (private: the public function always copies),
    which returns a new model and never changes its input, and the metadata models are frozen, so the staged state
    shares what it did not change with the table's metadata. The catalog's commit still applies the updates through
    the public function, so what is committed is pyiceberg's own result.
    """

    _memo: tuple[TableMetadata, tuple[object, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        memo, base, staged = self._memo, self._table.metadata, self._updates
        if memo is None or memo[0] is not base or memo[1] is not staged:
            memo = self._memo = (base, staged, _staged_metadata(base, staged))
        return memo[2]


def _staged_metadata(base: TableMetadata, updates: tuple[TableUpdate, ...]) -> TableMetadata:
    """``update_table_metadata(base, updates)`` without its final deep copy (nothing staged: ``base`` itself)."""
    context = _TableMetadataUpdateContext()
    staged = base
    for update in updates:
        staged = _apply_table_update(update, staged, context)
    if context.has_changes() and staged.last_updated_ms == base.last_updated_ms:
        staged = staged.model_copy(update={"last_updated_ms": datetime_to_millis(datetime.now().astimezone())})
    staged.spec().check_compatible(staged.schema())
    staged.sort_order().check_compatible(staged.schema())
    return staged


def transaction(table: Table) -> Transaction:
    """``table.transaction()`` whose cost does not grow with the snapshots the table keeps."""
    return _MemoTransaction(table)


# ------------------------------------------------------------------------------------------------- data files
def arrow_to_data_files(
    table_metadata: TableMetadata,
    io: FileIO,
    rows: pa.Table,
    *,
    write_uuid: uuid.UUID | None = None,
    counter: itertools.count[int] | None = None,
) -> list[DataFile]:
    """Write ``rows`` as Parquet data files of the table (cut by partition and target size); commits nothing."""
    # Why private: pyiceberg 0.12 writes data files only inside Table.append/overwrite, which commit at once. The
    # bronze ingest writes an hour batch by batch and commits a range of hours once; the publish step commits its
    # files on the audit branch with explicit deletes. add_files() is no substitute: it takes files written
    # elsewhere and re-reads each footer. Replaced by a public "write files, commit later" API when pyiceberg
    # has one (proposed as Table.write_parquet in apache/iceberg-python#1737, not merged).
    return list(
        _dataframe_to_data_files(table_metadata=table_metadata, df=rows, io=io, write_uuid=write_uuid, counter=counter)
    )


def split_by_partition(spec: PartitionSpec, schema: Schema, rows: pa.Table) -> list[tuple[PartitionKey, pa.Table]]:
    """``rows`` cut by the partition spec: each partition's key (its values and path) and its rows."""
    # Why private: a data file written by write_file() needs its PartitionKey, which pyiceberg 0.12 computes from
    # Arrow rows only in this helper of its writer (computing it ourselves would re-implement every transform).
    # Replaced by a public partitioning helper, or by the write API above taking one partition's rows.
    return [(p.partition_key, p.arrow_table_partition) for p in _determine_partitions(spec, schema, rows)]


# ------------------------------------------------------------------------------------------------- rewrites
class RewriteFiles(_OverwriteFiles):
    """Deletes and adds data files holding the same rows in one REPLACE snapshot; concurrent appends are no conflict.

    A replaced file that is no longer live fails the commit with ``ValidationException``.
    """

    # Why private: pyiceberg 0.12's public overwrite records OVERWRITE (readers and other writers' validation take
    # it as changed rows) and, under a table's default serializable isolation, fails on any concurrent append.
    # What we need is Java's RewriteFiles; replaced by a public replace of given data files when pyiceberg has one
    # (proposed in apache/iceberg-python#3130).
    def __init__(self, tx: Transaction, io: FileIO, properties: dict[str, str]) -> None:
        super().__init__(Operation.OVERWRITE, tx, io, snapshot_properties=properties)

    def _summary(self, snapshot_properties: dict[str, str] | None = None) -> Summary:  # type: ignore[override]
        summary = super()._summary(snapshot_properties or {})
        # REPLACE tells readers (and other writers' validation) that no logical data changed.
        return Summary(Operation.REPLACE, **summary.additional_properties)

    def _validate_concurrency(self) -> None:
        window = self._commit_window
        if window is None or window.is_empty() or window.head is None:
            return
        # Liveness of every replaced file is enforced by _deleted_entries (ValidationException if one is gone);
        # here only delete files attached concurrently to a replaced file would make the rewrite lose a delete.
        _validate_no_new_deletes_for_data_files(
            self._transaction._table, window.head, None, self._deleted_data_files, window.base
        )


class ManifestRewrite(_SnapshotProducer["ManifestRewrite"]):
    """Replaces the parent snapshot's data manifests by new ones laid out by ``planner``; REPLACE, no row changes.

    Entries keep their status EXISTING and their sequence numbers; delete manifests are carried over as they are.
    """

    # Why private: pyiceberg 0.12 has no manifest rewrite (apache/iceberg-python#270, #3629); a snapshot producer
    # of our own is the only way to commit manifests we lay out. Replaced by table.maintenance.rewrite_manifests()
    # once pyiceberg ships it, if it can keep the entries ordered by partition.
    def __init__(self, tx: Transaction, io: FileIO, properties: dict[str, str], planner: ManifestPlanner) -> None:
        super().__init__(Operation.REPLACE, tx, io, snapshot_properties=properties)
        self._planner = planner
        self.manifests_in = 0
        self.manifests_out = 0

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []

    def _validate_concurrency(self) -> None:
        """Rewriting manifests changes no data: whatever landed concurrently is re-read from the new head."""

    def _parent(self) -> Snapshot | None:
        parent_id = self._parent_snapshot_id
        return None if parent_id is None else self._transaction.table_metadata.snapshot_by_id(parent_id)

    def _existing_manifests(self) -> list[ManifestFile]:
        parent = self._parent()
        if parent is None:
            return []
        manifests = parent.manifests(io=self._io)
        self.manifests_in = len(manifests)
        keep = [m for m in manifests if m.content != ManifestContent.DATA]
        data = sorted((m for m in manifests if m.content == ManifestContent.DATA), key=lambda m: m.partition_spec_id)
        out: list[ManifestFile] = []
        for spec_id, members in itertools.groupby(data, key=lambda m: m.partition_spec_id):
            group = list(members)
            entries = [e for m in group for e in self.fetch_manifest_entry(m, discard_deleted=True)]
            spec = self.spec(spec_id)
            for planned in self._planner(spec, self.schema(), entries, sum(m.manifest_length for m in group)):
                with self.new_manifest_writer(spec) as writer:
                    for entry in planned:
                        writer.existing(entry)
                out.append(writer.to_manifest_file())
        self.manifests_out = len(out) + len(keep)
        return out + keep

    def _summary(self, snapshot_properties: dict[str, str] | None = None) -> Summary:  # type: ignore[override]
        parent = self._parent()
        carried = parent.summary.additional_properties if parent is not None and parent.summary is not None else {}
        # The parent's totals (the six total-* keys) carry over: no row, data file or delete changes.
        totals = {key: value for key, value in carried.items() if key.startswith("total-")}
        props = {
            **totals,
            **(snapshot_properties or {}),
            "manifests-replaced": str(self.manifests_in),
            "manifests-created": str(self.manifests_out),
        }
        return Summary(Operation.REPLACE, **props)
