"""Table health: file counts and small-file ratio per partition, snapshots, manifests, orphan bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pyiceberg.table import Table

from logistics_platform.lib.maintenance.compaction import plan_partitions
from logistics_platform.lib.maintenance.files import find_orphans, manifest_count


@dataclass(frozen=True)
class PartitionHealth:
    partition: str
    files: int
    small_files: int
    bytes: int

    @property
    def small_file_ratio(self) -> float:
        return self.small_files / self.files if self.files else 0.0


@dataclass
class TableHealth:
    table: str
    snapshots: int = 0
    data_files: int = 0
    data_bytes: int = 0
    manifests_current: int = 0
    manifests_max: int = 0
    orphan_files: int = 0
    orphan_bytes: int = 0  # unreferenced files of any age (young ones may be commits in flight)
    partitions: list[PartitionHealth] = field(default_factory=list)

    @property
    def small_files(self) -> int:
        return sum(p.small_files for p in self.partitions)

    @property
    def small_file_ratio(self) -> float:
        return self.small_files / self.data_files if self.data_files else 0.0

    def worst_partition(self) -> PartitionHealth | None:
        """The partition with most small files; the newest is skipped (it fills up during the day)."""
        parts = sorted(self.partitions, key=lambda p: p.partition)[:-1]
        return max(parts, key=lambda p: (p.small_files, p.partition), default=None)


# Warning thresholds (a nightly compaction keeps a healthy table far below them).
MAX_SMALL_FILES_PER_PARTITION = 48  # two days of hourly files without compaction
MAX_SNAPSHOTS = 2000
# Far above the consolidation threshold plus a day of hourly commits: manifest consolidation is not running.
MAX_MANIFESTS_PER_SNAPSHOT = 100
MAX_ORPHAN_BYTES = 1024**3


def table_health(table: Table, *, small_file_bytes: int, now: datetime) -> TableHealth:
    """Measure ``table`` (reads manifests; the orphan part lists the table location)."""
    h = TableHealth(table=".".join(table.name()), snapshots=len(table.metadata.snapshots))
    for label, (all_files, small, _) in sorted(plan_partitions(table, small_file_bytes).items()):
        size = sum(f.file_size_in_bytes for f in all_files)
        h.partitions.append(PartitionHealth(label, len(all_files), len(small), size))
        h.data_files += len(all_files)
        h.data_bytes += size
    h.manifests_current = manifest_count(table)
    h.manifests_max = max((len(s.manifests(table.io)) for s in table.metadata.snapshots), default=0)
    orphans = find_orphans(table, safety_window=timedelta(0), now=now)
    unreferenced = orphans.orphans + orphans.young_unreferenced
    h.orphan_files, h.orphan_bytes = len(unreferenced), sum(f.size for f in unreferenced)
    return h
