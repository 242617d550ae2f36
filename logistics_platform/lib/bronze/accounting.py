"""Per hour and topic: landed lines = bronze rows + quarantine rows + tombstones, recounted from the files and from
what the tables hold (record counts in their manifests), independently of the ingest (docs/internals/ingest.md,
"Accounting")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import In
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.commit import hour_files
from logistics_platform.lib.bronze.increment import APPEND, UNCHANGED
from logistics_platform.lib.bronze.landing import LandingFile, list_hour_files, scan_file, topic_specs
from logistics_platform.lib.bronze.reports import IngestReport
from logistics_platform.lib.bronze.tables import hour_column
from logistics_platform.lib.bronze.unread import unread_in_hour
from logistics_platform.lib.connections import catalog_of
from logistics_platform.lib.timekeys import hour_start
from logistics_platform.settings import Settings

SCOPE_HOUR = "hour"
SCOPE_INCREMENT = "increment"
SCOPE_UNCHANGED = "unchanged"
_QUARANTINE_COLUMNS = ("_arrival_hour", "_topic", "reason")


@dataclass(frozen=True)
class TopicAccount:
    table: str
    topic: str
    files: int
    lines: int
    tombstones: int
    bronze_rows: int
    quarantine_rows: int  # quarantined lines (rows of reason corrupt_file are not lines: see corrupt_rows)
    corrupt_files: tuple[str, ...] = ()  # landed files that cannot be read to their end (relative paths)
    corrupt_rows: int = 0  # quarantine rows of reason corrupt_file
    scope: str = SCOPE_HOUR  # what was accounted: the whole hour, the files an append added, or nothing new
    # files in the hour's folder that are not read (unknown extension, a sink's key or header file): path -> why
    unread_files: tuple[tuple[str, str], ...] = ()

    @property
    def balanced(self) -> bool:
        lines_ok = self.lines == self.bronze_rows + self.quarantine_rows + self.tombstones
        return lines_ok and self.corrupt_rows == len(self.corrupt_files)

    def as_dict(self) -> dict[str, int | str | bool]:
        d: dict[str, int | str | bool] = {
            k: v for k, v in asdict(self).items() if k not in ("corrupt_files", "corrupt_rows", "unread_files")
        }
        if self.corrupt_files or self.corrupt_rows:
            d["corrupt_files"] = ", ".join(self.corrupt_files)
            d["corrupt_rows"] = self.corrupt_rows
        if self.unread_files:
            d["unread_files"] = "; ".join(f"{path}: {why}" for path, why in self.unread_files)
        return {**d, "balanced": self.balanced}


def _account(
    settings: Settings, hour: datetime, spec: bs.TopicSpec, files: list[LandingFile], n: tuple[int, int, int]
) -> TopicAccount:
    """``files`` (lines, tombstones, damaged files: counted here) against (rows, quarantined, corrupt rows)."""
    scans = [scan_file(f) for f in files]
    corrupt = tuple(f.relpath for f, c in zip(files, scans, strict=True) if c.corrupt is not None)
    lines, tombstones = sum(c.lines for c in scans), sum(c.tombstones for c in scans)
    rows, quarantined, corrupt_rows = n
    unread = tuple(unread_in_hour(settings.landing_dir, spec.topic, hour).items())
    found = (len(files), lines, tombstones, rows, quarantined, corrupt, corrupt_rows)
    return TopicAccount(spec.table, spec.topic, *found, unread_files=unread)


def _table(catalog: Catalog, table: str) -> Table | None:
    """The bronze table, or None before its first commit."""
    try:
        t = catalog.load_table(f"{bs.NAMESPACE}.{table}")
    except NoSuchTableError:
        return None
    return t if t.current_snapshot() is not None else None


def _hour_rows(t: Table | None, table: str, hours: Sequence[datetime]) -> dict[datetime, int]:
    """Hour -> rows the table holds for it: the record counts of its own data files (manifests, no data read); an
    hour in files shared with other hours (compacted) or with delete files is counted by a scan of its column."""
    if t is None or not hours:
        return {}
    column = hour_column(table)
    found = hour_files(t, column, hours)
    out = {h: hf.records for h, hf in found.items()}
    if mixed := [h for h, hf in found.items() if hf.mixed]:
        scan = t.scan(row_filter=In(column, [h.isoformat() for h in mixed]), selected_fields=(column,))
        out.update({h: 0 for h in mixed} | Counter(scan.to_arrow().column(column).to_pylist()))
    return out


def _quarantined(t: Table | None, hours: Sequence[datetime]) -> Counter[tuple[datetime, str, bool]]:
    """(hour, topic, reason is corrupt_file) -> quarantine rows of ``hours`` (a small table: its rows are read)."""
    if t is None or not hours:
        return Counter()
    scan = t.scan(row_filter=In("_arrival_hour", [h.isoformat() for h in hours]), selected_fields=_QUARANTINE_COLUMNS)
    return _quarantine_counts(scan.to_arrow().to_pydict())


def _quarantine_counts(rows: dict[str, list[Any]]) -> Counter[tuple[datetime, str, bool]]:
    hour, topic, reason = (rows[c] for c in _QUARANTINE_COLUMNS)
    return Counter((h, t, r == bs.REASON_CORRUPT_FILE) for h, t, r in zip(hour, topic, reason, strict=True))


def account_hours(
    settings: Settings, arrival_hours: Sequence[datetime], catalog: Catalog | None = None
) -> dict[datetime, dict[str, TopicAccount]]:
    """Hour -> table -> that hour's accounting, for every hour of ``arrival_hours`` (one table scan per table)."""
    hours = sorted({hour_start(h) for h in arrival_hours})
    catalog = catalog_of(settings, catalog)
    out: dict[datetime, dict[str, TopicAccount]] = {h: {} for h in hours}
    quarantined = _quarantined(_table(catalog, bs.QUARANTINE_TABLE), hours)
    for table, spec in topic_specs(settings.landing_dir).items():  # outside the contract too
        rows = _hour_rows(_table(catalog, table), table, hours)
        for hour in hours:
            files = list_hour_files(settings.landing_dir, spec.topic, hour)
            q, c = quarantined[hour, spec.topic, False], quarantined[hour, spec.topic, True]
            out[hour][table] = _account(settings, hour, spec, files, (rows.get(hour, 0), q, c))
    return out


def account_ingest(
    settings: Settings, reports: Sequence[IngestReport], catalog: Catalog | None = None
) -> dict[datetime, dict[str, TopicAccount]]:
    """Hour -> table -> the accounting of what an ingest did: the whole hour, the files an append added, or nothing."""
    whole = [r.arrival_hour for r in reports if r.mode not in (APPEND, UNCHANGED)]
    catalog = catalog_of(settings, catalog)
    out = account_hours(settings, whole, catalog) if whole else {}
    for r in reports:
        if r.mode == APPEND:
            out[r.arrival_hour] = _account_increment(settings, catalog, r)
        elif r.mode == UNCHANGED:
            out[r.arrival_hour] = {
                t: TopicAccount(t, tr.topic, 0, 0, 0, 0, 0, scope=SCOPE_UNCHANGED) for t, tr in r.topics.items()
            }
    return out


def _live(catalog: Catalog, table: str, hour: datetime, written: Sequence[str]) -> tuple[Table | None, list[DataFile]]:
    """The table, and the data files of ``written`` that its current snapshot lists for ``hour`` (manifests)."""
    t = _table(catalog, table) if written else None
    if t is None:
        return t, []
    found = hour_files(t, hour_column(table), [hour])[hour]
    wanted = set(written)
    return t, [f for f in [*found.files, *found.mixed] if f.file_path in wanted]


def _account_increment(settings: Settings, catalog: Catalog, report: IngestReport) -> dict[str, TopicAccount]:
    """Table -> the new files' lines against the rows of the data files the append added (their record counts)."""
    hour = report.arrival_hour
    out: dict[str, TopicAccount] = {}
    q_table, q_files = _live(catalog, bs.QUARANTINE_TABLE, hour, report.quarantine_written)
    quarantined: Counter[tuple[datetime, str, bool]] = Counter()
    for f in q_files:  # few and small
        with q_table.io.new_input(f.file_path).open() as stream:  # type: ignore[union-attr]
            quarantined += _quarantine_counts(pq.read_table(stream, columns=list(_QUARANTINE_COLUMNS)).to_pydict())
    for table, tr in report.topics.items():
        new = {rel for rel, _ in tr.read_files}
        files = [f for f in list_hour_files(settings.landing_dir, tr.topic, hour) if f.relpath in new]
        rows = sum(f.record_count for f in _live(catalog, table, hour, tr.written)[1])
        q, c = quarantined[hour, tr.topic, False], quarantined[hour, tr.topic, True]
        out[table] = replace(_account(settings, hour, bs.spec_of(tr.topic), files, (rows, q, c)), scope=SCOPE_INCREMENT)
    return out
