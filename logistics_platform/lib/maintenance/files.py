"""Which files a table's metadata references (in one normal form), listing/deleting through pyarrow, orphan removal."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pyarrow import fs as pafs
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

log = logging.getLogger(__name__)


def pyarrow_io(table: Table) -> PyArrowFileIO:
    """The table's FileIO as a PyArrowFileIO (it carries the S3 credentials in its properties)."""
    io = table.io
    return io if isinstance(io, PyArrowFileIO) else PyArrowFileIO(io.properties)


def normalize(io: PyArrowFileIO, location: str) -> str:
    """A location in the normal form used for all comparisons."""
    return io.parse_location(location, io.properties)[2]


def filesystem(io: PyArrowFileIO, location: str) -> tuple[pafs.FileSystem, str]:
    """(pyarrow FileSystem, path within it) for a location such as ``file:///x`` or ``s3://bucket/key``."""
    scheme, netloc, path = io.parse_location(location, io.properties)
    return io.fs_by_scheme(scheme, netloc), path


def manifest_count(table: Table) -> int:
    """How many manifests the table's current snapshot lists (0 without one)."""
    snap = table.current_snapshot()
    return len(snap.manifests(table.io)) if snap else 0


@dataclass
class ReferencedFiles:
    """Files reachable from a table's metadata, in normal form, by kind."""

    metadata_files: set[str] = field(default_factory=set)
    manifest_lists: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    content_files: set[str] = field(default_factory=set)  # data files and delete files
    other_files: set[str] = field(default_factory=set)  # statistics (puffin) files

    def all(self) -> set[str]:
        return self.metadata_files | self.manifest_lists | self.manifests | self.content_files | self.other_files

    def snapshot_files(self) -> set[str]:
        """Everything that snapshots reference (not the metadata.json files themselves)."""
        return self.manifest_lists | self.manifests | self.content_files


def referenced_files(table: Table, snapshots: Iterable[Snapshot] | None = None) -> ReferencedFiles:
    """Files referenced by ``snapshots`` (default: all), the metadata file, its metadata log and statistics files."""
    io = pyarrow_io(table)
    md = table.metadata
    snaps = list(md.snapshots if snapshots is None else snapshots)
    out = ReferencedFiles()
    if table.metadata_location:
        out.metadata_files.add(normalize(io, table.metadata_location))
    out.metadata_files.update(normalize(io, entry.metadata_file) for entry in md.metadata_log)
    for stat in [*md.statistics, *md.partition_statistics]:
        out.other_files.add(normalize(io, stat.statistics_path))

    manifests: dict[str, ManifestFile] = {}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for snap, snap_manifests in zip(snaps, pool.map(lambda s: s.manifests(io), snaps), strict=True):
            out.manifest_lists.add(normalize(io, snap.manifest_list))
            for m in snap_manifests:
                manifests.setdefault(m.manifest_path, m)
        out.manifests.update(normalize(io, p) for p in manifests)

        def entries(m: ManifestFile) -> list[str]:
            # Only live entries count: a file that appears solely as DELETED cannot be read from this snapshot.
            return [normalize(io, e.data_file.file_path) for e in m.fetch_manifest_entry(io, discard_deleted=True)]

        for paths in pool.map(entries, manifests.values()):
            out.content_files.update(paths)
    return out


@dataclass(frozen=True)
class ListedFile:
    path: str  # normal form
    size: int
    mtime: datetime


def list_files(io: PyArrowFileIO, location: str) -> list[ListedFile]:
    """Every file under ``location`` (recursively), with size and modification time (UTC)."""
    fs, root = filesystem(io, location)
    try:
        infos = fs.get_file_info(pafs.FileSelector(root.rstrip("/"), recursive=True, allow_not_found=True))
    except FileNotFoundError:
        return []
    epoch = datetime.fromtimestamp(0, UTC)
    files = [i for i in infos if i.type == pafs.FileType.File]
    return [ListedFile(path=i.path, size=i.size or 0, mtime=(i.mtime or epoch).astimezone(UTC)) for i in files]


def delete_files(io: PyArrowFileIO, location_root: str, paths: list[str]) -> tuple[int, list[str]]:
    """Delete files given in normal form; returns (deleted count, failures). A missing file counts as deleted."""
    fs, _ = filesystem(io, location_root)
    failed = []
    for path in paths:
        try:
            fs.delete_file(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            # A failed delete leaves an unreferenced file that the next orphan sweep removes; keep going.
            log.warning("could not delete %s: %s", path, exc)
            failed.append(path)
    return len(paths) - len(failed), failed


# Files a catalog or engine may keep beside the metadata without referencing them from it.
_NEVER_ORPHANS = ("version-hint.text",)


@dataclass
class OrphanResult:
    table: str
    orphans: list[ListedFile] = field(default_factory=list)  # past the window (deleted unless dry-run)
    young_unreferenced: list[ListedFile] = field(default_factory=list)  # inside the window: kept
    deleted: int = 0

    @property
    def orphan_bytes(self) -> int:
        return sum(f.size for f in self.orphans)


def find_orphans(table: Table, *, safety_window: timedelta, now: datetime) -> OrphanResult:
    """Unreferenced files under the table location, split by the safety window."""
    io = pyarrow_io(table)
    # Refresh first: a file committed after we loaded the table must count as referenced.
    table.refresh()
    referenced = referenced_files(table).all()
    cutoff = now - safety_window
    result = OrphanResult(table=".".join(table.name()))
    for f in sorted(list_files(io, table.location()), key=lambda f: f.path):
        if f.path in referenced or f.path.rsplit("/", 1)[-1] in _NEVER_ORPHANS:
            continue
        (result.orphans if f.mtime < cutoff else result.young_unreferenced).append(f)
    return result


def remove_orphans(table: Table, *, safety_window: timedelta, now: datetime, dry_run: bool = False) -> OrphanResult:
    """Delete unreferenced files older than the window (``dry_run`` only lists them)."""
    result = find_orphans(table, safety_window=safety_window, now=now)
    if not dry_run and result.orphans:
        result.deleted, _ = delete_files(pyarrow_io(table), table.location(), [f.path for f in result.orphans])
    return result
