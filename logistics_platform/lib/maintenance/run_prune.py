"""Which finished runs are superseded: none of their events is the latest of its kind; their files removed
(docs/operations.md, "Dagster's own storage")."""

from collections.abc import Collection, Hashable, Mapping
from pathlib import Path


def superseded(events: Mapping[str, Collection[Hashable]], latest: Mapping[Hashable, str]) -> list[str]:
    """Of ``events`` (run id -> the kinds of its events: an asset partition, a check, an hour it built), the runs that
    hold the latest event of no kind; ``latest`` maps a kind to the run holding its latest (a kind not in it keeps)."""
    return [run for run, kinds in events.items() if all(latest.get(kind, run) != run for kind in kinds)]


def remove_sqlite_file(path: Path) -> None:
    """Delete a SQLite database file with its write-ahead log and shared-memory files (those that exist)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
