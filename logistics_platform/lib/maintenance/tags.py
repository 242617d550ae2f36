"""Daily tags ``daily-YYYY-MM-DD``: the snapshot current at the end of each UTC day, protected from expiry."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from pyiceberg.table import Table
from pyiceberg.table.refs import SnapshotRefType

PREFIX = "daily-"
_TAG_RE = re.compile(r"^daily-(\d{4}-\d{2}-\d{2})$")


@dataclass
class TagResult:
    table: str
    created: dict[str, int] = field(default_factory=dict)  # tag -> snapshot id
    removed: list[str] = field(default_factory=list)


def tag_name(day: date) -> str:
    return f"{PREFIX}{day.isoformat()}"


def snapshot_current_at(table: Table, at: datetime) -> int | None:
    """Id of the snapshot that was the table's current one at ``at`` (from the snapshot log), if it still exists."""
    md = table.metadata
    at_ms = int(at.timestamp() * 1000)
    best: int | None = None
    for entry in md.snapshot_log:
        if entry.timestamp_ms <= at_ms and md.snapshot_by_id(entry.snapshot_id) is not None:
            best = entry.snapshot_id
    if best is None:
        # A table whose snapshot log was trimmed: fall back to the newest snapshot committed by then.
        candidates = [s for s in md.snapshots if s.timestamp_ms <= at_ms]
        best = max(candidates, key=lambda s: s.timestamp_ms).snapshot_id if candidates else None
    return best


def apply_daily_tags(table: Table, *, now: datetime, retention_days: int, dry_run: bool = False) -> TagResult:
    """Tag every complete UTC day (within the retention) that has no tag yet; drop tags past the retention."""
    result = TagResult(table=".".join(table.name()))
    md = table.metadata
    if not md.snapshots:
        return result
    today = now.astimezone(UTC).date()
    oldest_kept = today - timedelta(days=retention_days)
    first_day = datetime.fromtimestamp(min(s.timestamp_ms for s in md.snapshots) / 1000, UTC).date()
    existing = {name for name, ref in md.refs.items() if ref.snapshot_ref_type == SnapshotRefType.TAG}

    day = max(first_day, oldest_kept)
    while day < today:  # only days that have ended
        name = tag_name(day)
        if name not in existing:
            end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)
            snapshot_id = snapshot_current_at(table, end - timedelta(microseconds=1))
            if snapshot_id is not None:
                result.created[name] = snapshot_id
        day += timedelta(days=1)

    for name in sorted(existing):
        m = _TAG_RE.match(name)
        if m and date.fromisoformat(m.group(1)) < oldest_kept:
            result.removed.append(name)

    if not dry_run and (result.created or result.removed):
        manage = table.manage_snapshots()
        for name, snapshot_id in result.created.items():
            manage = manage.create_tag(snapshot_id, name)
        for name in result.removed:
            manage = manage.remove_tag(name)
        manage.commit()
    return result
