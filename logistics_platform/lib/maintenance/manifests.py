"""Manifest consolidation (pyiceberg 0.12 has no ``rewrite_manifests``; this is ours).

Every hourly commit adds at least one manifest, so a scan plan reads hundreds of tiny manifests. When the
current snapshot carries more than a threshold, its data manifests are rewritten into few manifests of about
``target_manifest_bytes`` each, grouped by partition spec and ordered by partition so that manifest-level
partition pruning stays effective. Entries keep their status EXISTING and their sequence numbers; delete
manifests are carried over as they are. The result is a REPLACE snapshot: no row changes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import (
    TOTAL_DATA_FILES,
    TOTAL_DELETE_FILES,
    TOTAL_EQUALITY_DELETES,
    TOTAL_FILE_SIZE,
    TOTAL_POSITION_DELETES,
    TOTAL_RECORDS,
    Operation,
    Summary,
)
from pyiceberg.table.update.snapshot import _SnapshotProducer

from logistics_platform.lib.maintenance.compaction import MAX_OUTER_ATTEMPTS, backoff


@dataclass
class ManifestRewriteResult:
    table: str
    manifests_before: int
    manifests_after: int
    rewritten: bool
    snapshot_id: int | None = None


class _RewriteManifests(_SnapshotProducer["_RewriteManifests"]):
    """Replaces the parent's data manifests by consolidated ones; recomputed from the new head on retry."""

    def __init__(self, *args: object, target_manifest_bytes: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._target_bytes = target_manifest_bytes
        self.manifests_in = 0
        self.manifests_out = 0

    def _deleted_entries(self) -> list[ManifestEntry]:
        return []

    def _validate_concurrency(self) -> None:
        """Rewriting manifests changes no data: whatever landed concurrently is re-read from the new head."""

    def _existing_manifests(self) -> list[ManifestFile]:
        parent = (
            self._transaction.table_metadata.snapshot_by_id(self._parent_snapshot_id)
            if self._parent_snapshot_id is not None
            else None
        )
        if parent is None:
            return []
        manifests = parent.manifests(io=self._io)
        self.manifests_in = len(manifests)
        keep = [m for m in manifests if m.content != ManifestContent.DATA]
        by_spec: dict[int, list[ManifestFile]] = defaultdict(list)
        for m in manifests:
            if m.content == ManifestContent.DATA:
                by_spec[m.partition_spec_id].append(m)
        out: list[ManifestFile] = []
        for spec_id, group in sorted(by_spec.items()):
            entries = [e for m in group for e in self.fetch_manifest_entry(m, discard_deleted=True)]
            schema = self.schema()
            spec = self.spec(spec_id)
            entries.sort(key=lambda e: spec.partition_to_path(e.data_file.partition, schema))
            # Live entries of the inputs average this many bytes in a manifest; size the outputs by it.
            total_bytes = sum(m.manifest_length for m in group)
            per_entry = max(1, total_bytes // max(1, len(entries)))
            per_manifest = max(1, self._target_bytes // per_entry)
            for start in range(0, len(entries), per_manifest):
                with self.new_manifest_writer(spec) as writer:
                    for entry in entries[start : start + per_manifest]:
                        writer.existing(entry)
                out.append(writer.to_manifest_file())
        self.manifests_out = len(out) + len(keep)
        return out + keep

    def _summary(self, snapshot_properties: dict[str, str] | None = None) -> Summary:  # type: ignore[override]
        md = self._transaction.table_metadata
        parent = md.snapshot_by_id(self._parent_snapshot_id) if self._parent_snapshot_id is not None else None
        totals = {}
        if parent is not None and parent.summary is not None:
            for key in (
                TOTAL_DATA_FILES,
                TOTAL_DELETE_FILES,
                TOTAL_RECORDS,
                TOTAL_FILE_SIZE,
                TOTAL_POSITION_DELETES,
                TOTAL_EQUALITY_DELETES,
            ):
                if (value := parent.summary.get(key)) is not None:
                    totals[key] = value
        props = {
            **totals,
            **(snapshot_properties or {}),
            "manifests-replaced": str(self.manifests_in),
            "manifests-created": str(self.manifests_out),
        }
        return Summary(Operation.REPLACE, **props)


def rewrite_manifests(
    table: Table,
    *,
    max_manifests: int,
    target_manifest_bytes: int = 8 * 1024 * 1024,
    dry_run: bool = False,
) -> ManifestRewriteResult:
    """Consolidate the current snapshot's data manifests when there are more than ``max_manifests``."""
    name = ".".join(table.name())
    snap = table.current_snapshot()
    before = len(snap.manifests(table.io)) if snap else 0
    if snap is None or before <= max_manifests or dry_run:
        return ManifestRewriteResult(name, before, before, rewritten=False)
    for attempt in range(1, MAX_OUTER_ATTEMPTS + 1):
        tx = table.transaction()
        producer = _RewriteManifests(
            Operation.REPLACE,
            tx,
            table.io,
            snapshot_properties={"logistics.maintenance": "rewrite-manifests"},
            target_manifest_bytes=target_manifest_bytes,
        )
        try:
            producer.commit()
            tx.commit_transaction()
            break
        except CommitFailedException:
            # Nothing landed; a concurrent commit moved the head. Re-plan from the new head.
            if attempt == MAX_OUTER_ATTEMPTS:
                raise
            backoff(attempt)
            table.refresh()
            snap = table.current_snapshot()
            before = len(snap.manifests(table.io)) if snap else 0
            if snap is None or before <= max_manifests:
                return ManifestRewriteResult(name, before, before, rewritten=False)
    after_snap = table.current_snapshot()
    after = len(after_snap.manifests(table.io)) if after_snap else 0
    return ManifestRewriteResult(name, before, after, rewritten=True, snapshot_id=producer.snapshot_id)
