"""Per hour and topic: landed lines = bronze rows + quarantine rows + tombstones, recounted from the files and
re-read with DuckDB, independently of the ingest (docs/internals/ingest.md, "Accounting")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.commit import hour_files
from logistics_platform.lib.bronze.increment import APPEND, UNCHANGED
from logistics_platform.lib.bronze.landing import LandingFile, list_hour_files, scan_file
from logistics_platform.lib.bronze.reports import IngestReport
from logistics_platform.lib.bronze.tables import hour_column
from logistics_platform.lib.bronze.unread import unread_in_hour
from logistics_platform.lib.connections import catalog_of, connect
from logistics_platform.lib.timekeys import hour_start
from logistics_platform.settings import Settings

SCOPE_HOUR = "hour"
SCOPE_INCREMENT = "increment"
SCOPE_UNCHANGED = "unchanged"
_IN_HOURS = "where _arrival_hour in (select unnest(?::timestamp[])) group by all"


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
    settings: Settings, hour: datetime, table: str, files: list[LandingFile], n: tuple[int, int, int]
) -> TopicAccount:
    """``files`` (lines, tombstones, damaged files: counted here) against (rows, quarantined, corrupt rows)."""
    lines = tombstones = 0
    corrupt: list[str] = []
    for f in files:
        c = scan_file(f)
        lines += c.lines
        tombstones += c.tombstones
        if c.corrupt is not None:
            corrupt.append(f.relpath)
    topic, (rows, quarantined, corrupt_rows) = bs.TOPICS[table].topic, n
    unread = tuple(unread_in_hour(settings.landing_dir, topic, hour).items())
    found = (len(files), lines, tombstones, rows, quarantined, tuple(corrupt), corrupt_rows)
    return TopicAccount(table, topic, *found, unread_files=unread)


def _location(catalog: Catalog, table: str) -> str | None:
    try:
        t = catalog.load_table(f"{bs.NAMESPACE}.{table}")
    except NoSuchTableError:
        return None
    return t.metadata_location if t.current_snapshot() is not None else None


def account_hour(settings: Settings, arrival_hour: datetime) -> dict[str, TopicAccount]:
    """Table -> the hour's accounting, landing files against what bronze holds for that hour now."""
    hour = hour_start(arrival_hour)
    return account_hours(settings, [hour])[hour]


def account_hours(
    settings: Settings, arrival_hours: Sequence[datetime], catalog: Catalog | None = None
) -> dict[datetime, dict[str, TopicAccount]]:
    """Hour -> table -> that hour's accounting, for every hour of ``arrival_hours`` (one table scan per table)."""
    hours = sorted({hour_start(h) for h in arrival_hours})
    catalog = catalog_of(settings, catalog)
    out: dict[datetime, dict[str, TopicAccount]] = {h: {} for h in hours}
    with connect(settings=settings) as con:
        q_loc = _location(catalog, bs.QUARANTINE_TABLE)
        sql = f"select _arrival_hour, _topic, reason = ?, count(*) from iceberg_scan(?) {_IN_HOURS}"
        q_rows = con.execute(sql, [bs.REASON_CORRUPT_FILE, q_loc, hours]).fetchall() if q_loc and hours else []
        quarantined = {(hour, topic, bool(is_file)): int(n) for hour, topic, is_file, n in q_rows}
        for table, spec in bs.TOPICS.items():
            loc = _location(catalog, table)
            sql = f"select _arrival_hour, count(*) from iceberg_scan(?) {_IN_HOURS}"
            rows: dict[datetime, int] = dict(con.execute(sql, [loc, hours]).fetchall()) if loc and hours else {}
            for hour in hours:
                files = list_hour_files(settings.landing_dir, spec.topic, hour)
                q, c = quarantined.get((hour, spec.topic, False), 0), quarantined.get((hour, spec.topic, True), 0)
                out[hour][table] = _account(settings, hour, table, files, (int(rows.get(hour, 0)), q, c))
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


def _live(catalog: Catalog, table: str, hour: datetime, written: Sequence[str]) -> list[str]:
    """The files of ``written`` that the table's current snapshot lists for ``hour`` (from its manifests)."""
    if not written:
        return []
    live = hour_files(catalog.load_table(f"{bs.NAMESPACE}.{table}"), hour_column(table), [hour])[hour].paths
    return [p for p in written if p in live]


def _account_increment(settings: Settings, catalog: Catalog, report: IngestReport) -> dict[str, TopicAccount]:
    """Table -> the new files' lines against the rows of the data files the append added (DuckDB reads them)."""
    hour = report.arrival_hour
    out: dict[str, TopicAccount] = {}
    with connect(settings=settings) as con:
        q_files = _live(catalog, bs.QUARANTINE_TABLE, hour, report.quarantine_written)
        sql = "select _topic, reason = ?, count(*) from read_parquet(?) group by all"
        q_rows = con.execute(sql, [bs.REASON_CORRUPT_FILE, q_files]).fetchall() if q_files else []
        quarantined = {(topic, bool(is_file)): int(n) for topic, is_file, n in q_rows}
        for table, tr in report.topics.items():
            new = {rel for rel, _ in tr.read_files}
            files = [f for f in list_hour_files(settings.landing_dir, tr.topic, hour) if f.relpath in new]
            data = _live(catalog, table, hour, tr.written)
            found = con.execute("select count(*) from read_parquet(?)", [data]).fetchone() if data else None
            q, c = quarantined.get((tr.topic, False), 0), quarantined.get((tr.topic, True), 0)
            account = _account(settings, hour, table, files, (int(found[0]) if found else 0, q, c))
            out[table] = replace(account, scope=SCOPE_INCREMENT)
    return out
