"""Daily tags ``daily-YYYY-MM-DD`` (each UTC day's last snapshot, kept from expiry) and time travel through DuckDB."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

import duckdb
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
    log = reversed(md.snapshot_log)
    best = next((e.snapshot_id for e in log if e.timestamp_ms <= at_ms and md.snapshot_by_id(e.snapshot_id)), None)
    if best is None:
        # A table whose snapshot log was trimmed: fall back to the newest snapshot committed by then.
        newest = max((s for s in md.snapshots if s.timestamp_ms <= at_ms), key=lambda s: s.timestamp_ms, default=None)
        best = newest.snapshot_id if newest else None
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

    result.removed = [n for n in sorted(existing) if (m := _TAG_RE.match(n)) and date.fromisoformat(m[1]) < oldest_kept]
    if not dry_run and (result.created or result.removed):
        with table.manage_snapshots() as manage:
            for name, snapshot_id in result.created.items():
                manage.create_tag(snapshot_id, name)
            for name in result.removed:
                manage.remove_tag(name)
    return result


class TimeTravelError(ValueError):
    """As-of value matching no tag, snapshot or time of the table (the message says what exists), or a failed query."""


@dataclass(frozen=True)
class AsOf:
    snapshot_id: int
    committed_at: datetime
    resolved_from: str  # e.g. "tag daily-2026-11-02", "snapshot id", "timestamp 2026-11-02T10:00:00+00:00"


def parse_timestamp(value: str) -> datetime | None:
    """ISO-8601 date or date-time (naive means UTC; a bare date means 00:00 of that day); None if not one."""
    try:
        dt = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def resolve_as_of(table: Table, as_of: str) -> AsOf:
    """Resolve ``as_of`` (a ref name, a snapshot id, or a timestamp) to one snapshot of ``table``."""
    md = table.metadata

    def found(snapshot_id: int, how: str) -> AsOf:
        snap = md.snapshot_by_id(snapshot_id)
        if snap is None:
            raise TimeTravelError(f"{how} points to snapshot {snapshot_id}, which has been expired")
        return AsOf(snapshot_id, datetime.fromtimestamp(snap.timestamp_ms / 1000, UTC), how)

    if as_of in md.refs:
        ref = md.refs[as_of]
        return found(ref.snapshot_id, f"{ref.snapshot_ref_type.value} {as_of}")
    if re.fullmatch(r"-?\d{6,}", as_of.strip()) and md.snapshot_by_id(int(as_of)) is not None:
        return found(int(as_of), "snapshot id")
    ts = parse_timestamp(as_of)
    if ts is not None:
        snapshot_id = snapshot_current_at(table, ts)
        if snapshot_id is None:
            first = min((s.timestamp_ms for s in md.snapshots), default=None)
            since = datetime.fromtimestamp(first / 1000, UTC).isoformat() if first else "never (no snapshots)"
            raise TimeTravelError(
                f"{'.'.join(table.name())} had no snapshot at {ts.isoformat()}; it has data since {since}"
            )
        return found(snapshot_id, f"timestamp {ts.isoformat()}")
    tags = sorted(md.refs)
    raise TimeTravelError(
        f"{as_of!r} is not a tag/branch, snapshot id or ISO timestamp of {'.'.join(table.name())}; "
        f"refs: {', '.join(tags[-10:]) or 'none'} (use `logistics-platform time-travel T --as-of 2026-11-02T10:00`)"
    )


def iceberg_scan_sql(table: Table, snapshot_id: int) -> str:
    """A DuckDB table expression reading ``table`` at ``snapshot_id``."""
    location = str(table.metadata_location).replace("'", "''")
    return f"iceberg_scan('{location}', snapshot_from_id => {int(snapshot_id)})"


def query_as_of(
    con: duckdb.DuckDBPyConnection, table: Table, as_of: str, sql: str | None = None
) -> tuple[AsOf, duckdb.DuckDBPyRelation]:
    """Run ``sql`` (default ``select *``) on views ``orders`` and ``bronze.orders`` of the table as of ``as_of``."""
    resolved = resolve_as_of(table, as_of)
    namespace, name = table.name()[-2], table.name()[-1]
    scan = iceberg_scan_sql(table, resolved.snapshot_id)
    con.execute(f'create schema if not exists "{namespace}"')
    con.execute(f'create or replace view "{namespace}"."{name}" as select * from {scan}')
    con.execute(f'create or replace view "{name}" as select * from {scan}')
    try:
        return resolved, con.sql(sql or f'select * from "{name}"')
    except duckdb.Error as exc:
        raise TimeTravelError(query_error(exc, namespace, name)) from exc


def query_error(exc: duckdb.Error, namespace: str, name: str) -> str:
    """One line for a query that DuckDB rejected, naming the relations the query can use."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return f'the query failed: {first}; the table is visible as "{name}" and "{namespace}"."{name}"'
