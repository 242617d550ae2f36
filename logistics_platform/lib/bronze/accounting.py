"""The accounting invariant of one arrival hour, computed independently of the ingest.

landed lines = bronze rows + quarantine rows + tombstones, per topic. The left side is counted from the
landing files' bytes (:func:`landing.count_lines`), the right side is read back from the committed Iceberg
tables with DuckDB's ``iceberg_scan`` (a reader other than the pyiceberg that wrote them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from pyiceberg.exceptions import NoSuchTableError

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.landing import count_lines, hour_start, list_hour_files
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.settings import Settings


@dataclass(frozen=True)
class TopicAccount:
    table: str
    topic: str
    files: int
    lines: int
    tombstones: int
    bronze_rows: int
    quarantine_rows: int

    @property
    def balanced(self) -> bool:
        return self.lines == self.bronze_rows + self.quarantine_rows + self.tombstones

    def as_dict(self) -> dict[str, int | str | bool]:
        return {**asdict(self), "balanced": self.balanced}


def _location(settings: Settings, table: str) -> str | None:
    try:
        t = load_catalog(settings).load_table(f"{bs.NAMESPACE}.{table}")
    except NoSuchTableError:
        return None
    return t.metadata_location if t.current_snapshot() is not None else None


def account_hour(settings: Settings, arrival_hour: datetime) -> dict[str, TopicAccount]:
    """Table -> the hour's accounting, landing files against what bronze holds for that hour now."""
    hour = hour_start(arrival_hour)
    con = connect()
    try:
        q_loc = _location(settings, bs.QUARANTINE_TABLE)
        quarantined: dict[str, int] = {}
        if q_loc is not None:
            quarantined = dict(
                con.execute(
                    "select _topic, count(*) from iceberg_scan(?) where _arrival_hour = ? group by _topic",
                    [q_loc, hour],
                ).fetchall()
            )
        out: dict[str, TopicAccount] = {}
        for table, spec in bs.TOPICS.items():
            lines = tombstones = 0
            files = list_hour_files(settings.landing_dir, spec.topic, hour)
            for f in files:
                n, t = count_lines(f)
                lines += n
                tombstones += t
            loc = _location(settings, table)
            rows = 0
            if loc is not None:
                (rows,) = con.execute(
                    "select count(*) from iceberg_scan(?) where _arrival_hour = ?", [loc, hour]
                ).fetchone() or (0,)
            out[table] = TopicAccount(
                table, spec.topic, len(files), lines, tombstones, int(rows), int(quarantined.get(spec.topic, 0))
            )
        return out
    finally:
        con.close()
