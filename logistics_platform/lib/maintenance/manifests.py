"""Manifest consolidation ordered by partition (pyiceberg 0.12 has no ``rewrite_manifests``)."""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import ManifestEntry
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from logistics_platform.lib.iceberg_internals import ManifestPlanner, ManifestRewrite
from logistics_platform.lib.maintenance.compaction import MAX_OUTER_ATTEMPTS, backoff
from logistics_platform.lib.maintenance.files import manifest_count


@dataclass
class ManifestRewriteResult:
    table: str
    manifests_before: int
    manifests_after: int
    rewritten: bool
    snapshot_id: int | None = None


def by_partition(target_manifest_bytes: int) -> ManifestPlanner:
    """Lay out a spec's entries ordered by partition, in manifests of about ``target_manifest_bytes`` each."""

    def plan(
        spec: PartitionSpec, schema: Schema, entries: list[ManifestEntry], manifest_bytes: int
    ) -> list[list[ManifestEntry]]:
        ordered = sorted(entries, key=lambda e: spec.partition_to_path(e.data_file.partition, schema))
        # Live entries of the inputs average this many bytes in a manifest; size the outputs by it.
        per_entry = max(1, manifest_bytes // max(1, len(ordered)))
        per_manifest = max(1, target_manifest_bytes // per_entry)
        return [ordered[start : start + per_manifest] for start in range(0, len(ordered), per_manifest)]

    return plan


def rewrite_manifests(
    table: Table,
    *,
    max_manifests: int,
    target_manifest_bytes: int = 8 * 1024 * 1024,
    dry_run: bool = False,
) -> ManifestRewriteResult:
    """Consolidate the current snapshot's data manifests when there are more than ``max_manifests``."""
    name = ".".join(table.name())
    before = manifest_count(table)
    if before == 0 or before <= max_manifests or dry_run:
        return ManifestRewriteResult(name, before, before, rewritten=False)
    for attempt in range(1, MAX_OUTER_ATTEMPTS + 1):
        tx = table.transaction()
        producer = ManifestRewrite(
            tx, table.io, {"logistics.maintenance": "rewrite-manifests"}, by_partition(target_manifest_bytes)
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
            before = manifest_count(table)
            if before == 0 or before <= max_manifests:
                return ManifestRewriteResult(name, before, before, rewritten=False)
    return ManifestRewriteResult(name, before, manifest_count(table), rewritten=True, snapshot_id=producer.snapshot_id)
