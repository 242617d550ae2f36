"""``bronze.ingest_log``: one row per topic and arrival hour, the files the hour holds and what they became
(committed last by the ingest; read by its planning, `verify`, the backlog and the landing sensor)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import GreaterThanOrEqual, In

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.reports import TopicReport
from logistics_platform.lib.timekeys import epoch_micros, hour_key, parse_hour_key, utc_naive

INGEST_LOG_IDENTIFIER = f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}"
# Up to this many hours the scan is filtered to them; beyond, the (small) log is read whole and filtered here.
_FILTER_MAX_HOURS = 48


@dataclass(frozen=True)
class IngestLogEntry:
    """One row of ``bronze.ingest_log``: the files of (topic, hour) and the counts they were ingested as."""

    topic: str
    hour: str  # hour key
    fingerprint: str
    files: tuple[tuple[str, int], ...]
    lines: int
    rows: int
    quarantined: int
    tombstones: int
    late_events: int = 0
    bytes: int = 0

    @property
    def balanced(self) -> bool:
        """Accounting invariant: every landed line is a row, a quarantined line or a tombstone."""
        return self.lines == self.rows + self.quarantined + self.tombstones


def read_log_entries(
    catalog: Catalog, hours: Iterable[datetime] | None = None
) -> dict[tuple[str, str], IngestLogEntry]:
    """(topic, hour key) -> the ingest log row, for ``hours`` (default all); empty before the first ingest."""
    try:
        table = catalog.load_table(INGEST_LOG_IDENTIFIER)
    except NoSuchTableError:
        return {}
    wanted = {hour_key(h) for h in hours} if hours is not None else None
    if wanted is not None and not wanted:
        return {}
    scan = table.scan()
    if wanted is not None and len(wanted) <= _FILTER_MAX_HOURS:
        scan = table.scan(row_filter=In("arrival_hour", [parse_hour_key(k).isoformat() for k in sorted(wanted)]))
    elif wanted is not None:  # many hours: from the first on (the recent ones, as `run` asks for)
        scan = table.scan(row_filter=GreaterThanOrEqual("arrival_hour", parse_hour_key(min(wanted)).isoformat()))
    out: dict[tuple[str, str], IngestLogEntry] = {}
    for row in scan.to_arrow().to_pylist():
        hk = hour_key(row["arrival_hour"])
        if wanted is not None and hk not in wanted:
            continue
        out[(row["topic"], hk)] = IngestLogEntry(
            topic=row["topic"],
            hour=hk,
            fingerprint=row["fingerprint"],
            files=tuple((str(p), int(s)) for p, s in json.loads(row["files"] or "[]")),
            **{k: int(row.get(k) or 0) for k in ("lines", "rows", "quarantined", "tombstones", "late_events", "bytes")},
        )
    return out


def log_row(hour: datetime, t: TopicReport) -> tuple[object, ...]:
    """The log row of topic report ``t`` of ``hour``, in column order."""
    counts = (t.bytes, t.lines, t.rows, t.quarantined, t.tombstones, t.late_events)
    files = json.dumps([list(f) for f in t.files])
    return (t.topic, epoch_micros(utc_naive(hour)), files, t.fingerprint, len(t.files), *counts)
