"""Orphan-file removal: files under a table's location that no metadata references, past a safety window."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyiceberg.table import Table

from logistics_platform.lib.maintenance.files import (
    ListedFile,
    delete_files,
    list_files,
    pyarrow_io,
    referenced_files,
)

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
    for f in list_files(io, table.location()):
        if f.path in referenced or f.path.rsplit("/", 1)[-1] in _NEVER_ORPHANS:
            continue
        (result.orphans if f.mtime < cutoff else result.young_unreferenced).append(f)
    result.orphans.sort(key=lambda f: f.path)
    result.young_unreferenced.sort(key=lambda f: f.path)
    return result


def remove_orphans(table: Table, *, safety_window: timedelta, now: datetime, dry_run: bool = False) -> OrphanResult:
    """Delete unreferenced files older than the window (``dry_run`` only lists them)."""
    result = find_orphans(table, safety_window=safety_window, now=now)
    if not dry_run and result.orphans:
        result.deleted, _ = delete_files(pyarrow_io(table), table.location(), [f.path for f in result.orphans])
    return result
