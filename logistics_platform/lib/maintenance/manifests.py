"""Manifest consolidation ordered by partition (pyiceberg 0.12 has no ``rewrite_manifests``)."""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import ManifestEntry
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from logistics_platform.lib.iceberg_internals import ManifestPlanner, ManifestRewrite, transaction
from logistics_platform.lib.maintenance.compaction import MAX_OUTER_ATTEMPTS, SNAPSHOT_PROP_KIND, backoff
from logistics_platform.lib.maintenance.files import manifest_count

TARGET_MANIFEST_BYTES = 8 * 1024 * 1024  # size of a consolidated manifest


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


def rewrite_manifests(table: Table, *, max_manifests: int, dry_run: bool = False) -> ManifestRewriteResult:
    """Consolidate the current snapshot's data manifests when there are more than ``max_manifests``."""
    name, attempt = ".".join(table.name()), 1
    while True:
        before = manifest_count(table)
        if before == 0 or before <= max_manifests or dry_run:
            return ManifestRewriteResult(name, before, before, rewritten=False)
        tx = transaction(table)
        planner = by_partition(TARGET_MANIFEST_BYTES)
        producer = ManifestRewrite(tx, table.io, {SNAPSHOT_PROP_KIND: "rewrite-manifests"}, planner)
        try:
            producer.commit()
            tx.commit_transaction()
            return ManifestRewriteResult(name, before, manifest_count(table), True, producer.snapshot_id)
        except CommitFailedException:
            # Nothing landed; a concurrent commit moved the head. Re-plan from the new head.
            if attempt == MAX_OUTER_ATTEMPTS:
                raise
            backoff(attempt)
            attempt += 1
            table.refresh()
