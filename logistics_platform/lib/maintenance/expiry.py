"""Snapshot expiry that frees storage.

pyiceberg's ``expire_snapshots()`` only edits metadata. Here: choose the snapshots to expire (older than the
retention, beyond the newest N of the main branch, not the target of any tag or branch), commit that, then
delete the manifest lists, manifests and data files that the expired snapshots referenced and that no
retained snapshot references, and the metadata.json files that fell out of the metadata log.

Crash safety: if the run dies after the metadata commit but before the deletes, nothing references those
files any more; the next run's orphan sweep (files under the table location referenced by no metadata, older
than the safety window) deletes them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyiceberg.table import Table, TableProperties
from pyiceberg.table.snapshots import ancestors_of

from logistics_platform.lib.maintenance.files import (
    delete_files,
    list_files,
    normalize,
    pyarrow_io,
    referenced_files,
)
from logistics_platform.lib.maintenance.options import Hooks

log = logging.getLogger(__name__)


@dataclass
class ExpiryResult:
    table: str
    snapshots_before: int = 0
    snapshots_expired: list[int] = field(default_factory=list)
    files_deleted: int = 0
    bytes_reclaimed: int = 0
    metadata_files_deleted: int = 0
    delete_failures: list[str] = field(default_factory=list)
    planned_deletes: list[tuple[str, int]] = field(default_factory=list)  # (path, size) in dry-run


def snapshots_to_expire(table: Table, older_than: datetime, min_keep: int) -> list[int]:
    """Snapshot ids that are older than ``older_than``, not among the newest ``min_keep`` of main, not a ref."""
    md = table.metadata
    protected = {ref.snapshot_id for ref in md.refs.values()}
    recent = [s.snapshot_id for s in ancestors_of(md.current_snapshot(), md)][:min_keep]
    protected.update(recent)
    cutoff_ms = int(older_than.timestamp() * 1000)
    return sorted(s.snapshot_id for s in md.snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in protected)


def ensure_metadata_retention(table: Table, previous_versions: int) -> bool:
    """Bound the metadata log and have each commit delete the metadata files that fall out of it."""
    wanted = {
        TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
        TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: str(previous_versions),
    }
    if all(table.properties.get(k) == v for k, v in wanted.items()):
        return False
    with table.transaction() as tx:
        tx.set_properties(wanted)
    return True


def expire_table(
    table: Table,
    *,
    retention: timedelta,
    min_keep: int,
    now: datetime,
    dry_run: bool = False,
    hooks: Hooks | None = None,
) -> ExpiryResult:
    """Expire old snapshots of ``table`` and delete the files only they referenced."""
    name = ".".join(table.name())
    io = pyarrow_io(table)
    result = ExpiryResult(table=name, snapshots_before=len(table.metadata.snapshots))
    expire_ids = snapshots_to_expire(table, now - retention, min_keep)
    result.snapshots_expired = expire_ids

    before = referenced_files(table)
    if dry_run:
        retained = [s for s in table.metadata.snapshots if s.snapshot_id not in set(expire_ids)]
        after = referenced_files(table, snapshots=retained)
    else:
        if expire_ids:
            table.maintenance.expire_snapshots().by_ids(expire_ids).commit()
            table.refresh()
            if hooks and hooks.after_expiry_commit:
                hooks.after_expiry_commit(name)  # a crash here leaves unreferenced files for the orphan sweep
        after = referenced_files(table)

    doomed = before.snapshot_files() - after.all()
    sizes = {f.path: f.size for f in list_files(io, table.location())}
    stale_metadata = _stale_metadata_files(table, after.metadata_files)
    if dry_run:
        result.planned_deletes = sorted((p, sizes.get(p, 0)) for p in doomed | set(stale_metadata))
        result.bytes_reclaimed = sum(size for _, size in result.planned_deletes)
        result.files_deleted = len(doomed)
        result.metadata_files_deleted = len(stale_metadata)
        return result

    existing = [p for p in sorted(doomed) if p in sizes]
    deleted, failed = delete_files(io, table.location(), existing)
    result.files_deleted = deleted
    result.delete_failures.extend(failed)
    md_deleted, md_failed = delete_files(io, table.location(), stale_metadata)
    result.metadata_files_deleted = md_deleted
    result.delete_failures.extend(md_failed)
    failed_set = set(failed) | set(md_failed)
    result.bytes_reclaimed = sum(sizes.get(p, 0) for p in [*existing, *stale_metadata] if p not in failed_set)
    return result


def _stale_metadata_files(table: Table, live_metadata: set[str]) -> list[str]:
    """metadata.json files outside the metadata log, written before the current one.

    A metadata file older than the current one can only belong to a commit that already lost the race (it was
    based on an older version), so deleting it cannot break a commit in flight; newer ones are left to the
    orphan sweep's age window.
    """
    io = pyarrow_io(table)
    current = normalize(io, table.metadata_location)
    listed = list_files(io, f"{table.location().rstrip('/')}/metadata")
    current_mtime = next((f.mtime for f in listed if f.path == current), None)
    if current_mtime is None:
        return []
    return sorted(
        f.path
        for f in listed
        if f.path.endswith(".metadata.json") and f.path not in live_metadata and f.mtime < current_mtime
    )
