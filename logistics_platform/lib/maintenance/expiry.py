"""Snapshot expiry that frees storage: nightly by age, and early for the micro-batches of a past clock hour."""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyiceberg.table import Table, TableProperties, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.table.update.snapshot import ExpireSnapshots

from logistics_platform.lib.maintenance.files import delete_files, list_files, normalize, pyarrow_io, referenced_files
from logistics_platform.lib.maintenance.options import Hooks

log = logging.getLogger(__name__)

# A snapshot superseded less than this long ago stays: a reader that started on it may still read its manifest list.
LIVE_SNAPSHOT_WINDOW = timedelta(minutes=15)
# Early expiry waits until this many snapshots qualify, so that its file deletes are batched.
EARLY_EXPIRY_MIN_SNAPSHOTS = 16
_HOUR_MS = 3_600_000


@dataclass
class ExpiryResult:
    table: str
    snapshots_expired: list[int] = field(default_factory=list)
    files_deleted: int = 0
    bytes_reclaimed: int = 0
    metadata_files_deleted: int = 0
    planned_deletes: list[tuple[str, int]] = field(default_factory=list)  # (path, size) in dry-run


def snapshots_to_expire(table: Table, older_than: datetime, min_keep: int) -> list[int]:
    """Snapshot ids that are older than ``older_than``, not among the newest ``min_keep`` of main, not a ref."""
    md = table.metadata
    recent = [s.snapshot_id for s in ancestors_of(md.current_snapshot(), md)][:min_keep]
    protected = {ref.snapshot_id for ref in md.refs.values()} | set(recent)
    cutoff_ms = int(older_than.timestamp() * 1000)
    return sorted(s.snapshot_id for s in md.snapshots if s.timestamp_ms < cutoff_ms and s.snapshot_id not in protected)


def micro_batch_snapshots(md: TableMetadata, now: datetime) -> list[int]:
    """Snapshots superseded more than the live window before ``now``, not the last of their UTC hour, not a ref."""
    cutoff_ms = int(now.timestamp() * 1000) - int(LIVE_SNAPSHOT_WINDOW.total_seconds() * 1000)
    protected = {ref.snapshot_id for ref in md.refs.values()}
    ordered = sorted(md.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number or 0))
    out = []
    for snap, successor in itertools.pairwise(ordered):
        last_of_hour = successor.timestamp_ms // _HOUR_MS != snap.timestamp_ms // _HOUR_MS
        if successor.timestamp_ms < cutoff_ms and not last_of_hour and snap.snapshot_id not in protected:
            out.append(snap.snapshot_id)
    return out


def stage_early_expiry(tx: Transaction, md: TableMetadata, now: datetime) -> list[int]:
    """Add the expiry of ``md``'s micro-batch snapshots to ``tx`` once enough qualify; returns the ids staged."""
    doomed = micro_batch_snapshots(md, now)
    if len(doomed) < EARLY_EXPIRY_MIN_SNAPSHOTS:
        return []
    ExpireSnapshots(tx).by_ids(doomed).commit()  # staged: applied with the transaction's own commit
    return doomed


def delete_expired_metadata(table: Table, before: TableMetadata, expired: list[int]) -> int:
    """Delete the manifest lists of ``expired`` snapshots and the manifests only they added; the count deleted."""
    if not expired:
        return 0
    io = pyarrow_io(table)
    gone = set(expired)
    snaps = [s for s in before.snapshots if s.snapshot_id in gone]
    first_ms = min(s.timestamp_ms for s in snaps)
    added = {m.manifest_path for s in snaps for m in s.manifests(io) if m.added_snapshot_id in gone}
    later = [s for s in table.metadata.snapshots if s.timestamp_ms >= first_ms]
    still = {m.manifest_path for s in later for m in s.manifests(io)}
    paths = [normalize(io, p) for p in sorted({s.manifest_list for s in snaps} | (added - still))]
    deleted, _ = delete_files(io, table.location(), paths)
    return deleted


def ensure_metadata_retention(table: Table, previous_versions: int) -> None:
    """Bound the metadata log and have each commit delete the metadata files that fall out of it."""
    wanted = {
        TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
        TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: str(previous_versions),
    }
    if any(table.properties.get(k) != v for k, v in wanted.items()):
        with table.transaction() as tx:
            tx.set_properties(wanted)


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
    expire_ids = snapshots_to_expire(table, now - retention, min_keep)
    result = ExpiryResult(table=name, snapshots_expired=expire_ids)

    before = referenced_files(table)
    if expire_ids and not dry_run:
        table.maintenance.expire_snapshots().by_ids(expire_ids).commit()
        table.refresh()
        if hooks and hooks.after_expiry_commit:
            hooks.after_expiry_commit(name)  # a crash here leaves unreferenced files for the orphan sweep
    # Once committed the expired snapshots are gone from the metadata; a dry run leaves them out here.
    expired = set(expire_ids)
    retained = [s for s in table.metadata.snapshots if s.snapshot_id not in expired]
    after = referenced_files(table, snapshots=retained)

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
    result.files_deleted, failed = delete_files(io, table.location(), existing)
    result.metadata_files_deleted, md_failed = delete_files(io, table.location(), stale_metadata)
    failed_set = set(failed) | set(md_failed)
    result.bytes_reclaimed = sum(sizes.get(p, 0) for p in [*existing, *stale_metadata] if p not in failed_set)
    return result


def _stale_metadata_files(table: Table, live_metadata: set[str]) -> list[str]:
    """metadata.json files outside the metadata log, written before the current one (lost commits' leftovers)."""
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
