"""Where ingestion stands: the landing zone compared with ``bronze.ingest_log`` (verify, backlog, schedule, run)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import EqualTo

from logistics_platform.lib.bronze.ingest_log import INGEST_LOG_IDENTIFIER, IngestLogEntry, read_log_entries
from logistics_platform.lib.bronze.landing import list_hour_files, scan_file
from logistics_platform.lib.bronze.schema import NAMESPACE, QUARANTINE_TABLE, REASON_CORRUPT_FILE
from logistics_platform.lib.operate.landing_watch import LOOKBACK_DAYS, hour_folders
from logistics_platform.lib.timekeys import hour_key, hour_start, parse_hour_key

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog


def read_ingest_log(catalog: Catalog, hours: Iterable[str] | None = None) -> dict[tuple[str, str], IngestLogEntry]:
    """(topic, hour key) -> the ingest log row, for the hour keys ``hours`` (default all); empty before any ingest."""
    wanted = [parse_hour_key(h) for h in hours] if hours is not None else None
    return read_log_entries(catalog, wanted)


def read_corrupt_files(catalog: Catalog, hours: Iterable[str] | None = None) -> dict[tuple[str, str], dict[str, str]]:
    """(topic, hour key) -> {file: error detail} of the files bronze.quarantine records as ``corrupt_file``."""
    try:
        table = catalog.load_table(f"{NAMESPACE}.{QUARANTINE_TABLE}")
    except NoSuchTableError:
        return {}
    wanted = set(hours) if hours is not None else None
    scan = table.scan(
        row_filter=EqualTo("reason", REASON_CORRUPT_FILE),
        selected_fields=("_topic", "_arrival_hour", "_source_file", "error_detail"),
    )
    out: dict[tuple[str, str], dict[str, str]] = {}
    for row in scan.to_arrow().to_pylist():
        hk = hour_key(row["_arrival_hour"])
        if wanted is None or hk in wanted:
            out.setdefault((row["_topic"], hk), {})[row["_source_file"]] = row["error_detail"] or ""
    return out


def folders_to_look_at(catalog: Catalog, landing_dir: Path) -> list[tuple[str, datetime]] | None:
    """:func:`folders_to_check` against ``bronze.ingest_log``'s (topic, hour) pairs; None (all) before any ingest."""
    try:
        rows = catalog.load_table(INGEST_LOG_IDENTIFIER).scan(selected_fields=("topic", "arrival_hour")).to_arrow()
    except NoSuchTableError:
        return None
    hours = map(hour_key, rows.column("arrival_hour").to_pylist())
    logged = set(zip(rows.column("topic").to_pylist(), hours, strict=True))
    return folders_to_check(hour_folders(landing_dir)[0], logged, LOOKBACK_DAYS) if logged else None


def folders_to_check(
    folders: Sequence[tuple[str, datetime]], logged: set[tuple[str, str]], lookback_days: int
) -> list[tuple[str, datetime]]:
    """The (topic, hour) folders ``run`` compares with the ingest log: those within ``lookback_days`` of the newest
    day (where delayed files land) and older ones the log has no row of; the rest are left to ``verify``."""
    if not folders:
        return []
    cutoff = max(h for _, h in folders).replace(hour=0) - timedelta(days=lookback_days + 1)
    return [(t, h) for t, h in folders if h >= cutoff or (t, hour_key(h)) not in logged]


@dataclass
class HourReport:
    """verify's finding for one arrival hour."""

    hour: str
    status: str  # ok | open | never_ingested | changed | partial | unbalanced | corrupt | not_landed
    stale: dict[str, str] = field(default_factory=dict)  # topic -> never | changed
    new_files: list[str] = field(default_factory=list)  # landed in a logged topic of the hour, not in its log row
    ingested_files: int = 0  # files the log records for the hour
    pending_files: int = 0  # landed files not in the log, of every topic
    entries: list[IngestLogEntry] = field(default_factory=list)
    corrupt_files: dict[str, str] = field(default_factory=dict)  # file -> why it cannot be read to its end

    @property
    def ok(self) -> bool:
        """Nothing to repair: accounted for, or the open hour (files still arriving) with nothing changed."""
        return self.status in ("ok", "open")


def compare(
    scan: Mapping[str, Mapping[str, str]],
    ingested: Mapping[tuple[str, str], IngestLogEntry],
    landing_dir: Path,
    corrupt: Mapping[tuple[str, str], Mapping[str, str]] | None = None,
    now: datetime | None = None,
) -> list[HourReport]:
    """Per landed (or logged) hour: never ingested, files changed since the ingest, or accounted for.

    ``corrupt`` (:func:`read_corrupt_files`) marks an ingested hour whose files could not all be read to the end.
    With ``now``, the hour in progress (and any later) is ``open`` unless a logged file changed or went away."""
    open_from = hour_key(hour_start(now)) if now is not None else None
    by_hour: dict[str, dict[str, IngestLogEntry]] = {}
    for (topic, hour), logged_entry in ingested.items():
        by_hour.setdefault(hour, {})[topic] = logged_entry
    reports = []
    for hour in sorted(set(scan) | set(by_hour)):
        landed = scan.get(hour, {})
        logged = by_hour.get(hour, {})
        report = HourReport(hour=hour, status="ok", entries=[logged[t] for t in sorted(logged)])
        report.ingested_files = sum(len(e.files) for e in logged.values())
        grown_only = True  # every logged file still landed with its size: the hour only gained files
        arrival = parse_hour_key(hour)
        for topic, fp in landed.items():
            entry = logged.get(topic)
            if entry is None:
                report.stale[topic] = "never"
                report.pending_files += len(list_hour_files(landing_dir, topic, arrival))
            elif entry.fingerprint != fp:
                report.stale[topic] = "changed"
                now_landed = {f.relpath: f for f in list_hour_files(landing_dir, topic, arrival)}
                known = dict(entry.files)
                grown_only &= all(rel in now_landed and now_landed[rel].size == size for rel, size in known.items())
                fresh = [rel for rel in now_landed if rel not in known]
                report.new_files += fresh
                report.pending_files += len(fresh)
        grown_only &= all(topic in landed for topic in logged)
        if open_from is not None and hour >= open_from and grown_only:
            report.status = "open"  # files still arriving: the next ingest appends the new ones
        elif not landed:
            report.status = "not_landed"  # logged but the files are gone: the landing zone was pruned
        elif report.stale and all(v == "never" for v in report.stale.values()) and not logged:
            report.status = "never_ingested"
        elif any(v == "changed" for v in report.stale.values()):
            report.status = "changed"
        elif report.stale:
            report.status = "partial"
        if report.status in ("ok", "open") and not all(e.balanced for e in report.entries):
            report.status = "unbalanced"
        elif report.status == "ok":
            for topic in sorted(logged):
                report.corrupt_files.update((corrupt or {}).get((topic, hour), {}))
            if report.corrupt_files:
                report.status = "corrupt"  # ingested as far as readable; waits for the producer to re-deliver
        reports.append(report)
    return reports


def changed_hours(
    hours: Iterable[str],
    scan: Mapping[str, Mapping[str, str]],
    ingested: Mapping[tuple[str, str], IngestLogEntry],
    landing_dir: Path,
) -> tuple[list[str], list[str]]:
    """(the hours of ``hours`` an ingest has work in, the up-to-date ones), both sorted; no data read.

    Up to date: :func:`compare` finds it ``ok`` (or ``corrupt``: ingested as far as readable) with every logged topic
    landed, so the ingest's own planning (lib/bronze/increment.py) would find nothing new there."""
    reports = {r.hour: r for r in compare(scan, ingested, landing_dir)}
    todo: list[str] = []
    current: list[str] = []
    for hour in sorted(set(hours)):
        r = reports.get(hour)
        same = r is not None and r.status in ("ok", "corrupt") and all(e.topic in scan.get(hour, {}) for e in r.entries)
        (current if same else todo).append(hour)
    return todo, current


@dataclass(frozen=True)
class Backlog:
    hours_pending: list[str]
    lines_pending: int
    files_pending: int
    latest_landed: str | None
    latest_ingested: str | None

    def as_metadata(self) -> dict[str, object]:
        return {
            "hours_pending": len(self.hours_pending),
            "lines_pending": self.lines_pending,
            "files_pending": self.files_pending,
            "oldest_pending_hour": self.hours_pending[0] if self.hours_pending else "-",
            "latest_landed_hour": self.latest_landed or "-",
            "latest_ingested_hour": self.latest_ingested or "-",
        }


def backlog(
    scan: Mapping[str, Mapping[str, str]], ingested: Mapping[tuple[str, str], IngestLogEntry], landing_dir: Path
) -> Backlog:
    """Hours, files and lines landed but not (or not in their current form) ingested."""
    pending: list[str] = []
    lines = files = 0
    for report in compare(scan, ingested, landing_dir):
        if report.stale:
            pending.append(report.hour)
            files += report.pending_files
            fresh = set(report.new_files)  # of the changed topics; a never-ingested topic's files are all pending
            for topic, why in report.stale.items():
                landed = list_hour_files(landing_dir, topic, parse_hour_key(report.hour))
                lines += sum(scan_file(f).lines for f in landed if why == "never" or f.relpath in fresh)
    latest_landed, latest_ingested = max(scan, default=None), max((h for _, h in ingested), default=None)
    return Backlog(pending, lines, files, latest_landed, latest_ingested)


def hours_between(earlier: str | None, later: str | None) -> float:
    """Hours from ``earlier`` to ``later`` hour keys (0 when either is missing or earlier is newer)."""
    if not earlier or not later:
        return 0.0
    return max(0.0, (parse_hour_key(later) - parse_hour_key(earlier)).total_seconds() / 3600)
