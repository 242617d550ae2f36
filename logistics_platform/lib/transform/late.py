"""Folding late events (``marts.late_events``) back into the event-time windows they missed: a fold recorded in
``ops.folded_windows`` counts in every later build, and re-runs the windowed marts for that window right away."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import duckdb

from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze.views import FOLDED_WINDOWS_TABLE, ensure_ops_tables
from logistics_platform.lib.transform.project import VAR_TIME_FORMAT, DbtRun, run_dbt
from logistics_platform.settings import Settings

# topic -> the windowed mart its late events would have changed
WINDOWED_TOPICS = {
    "oltp.public.orders": "fct_hourly_region_orders",
    "logistics.tracking_pings": "fct_courier_hourly_activity",
}
_ALIASES = {
    "orders": "oltp.public.orders",
    "tracking_pings": "logistics.tracking_pings",
    "pings": "logistics.tracking_pings",
}


class FoldError(ValueError):
    """The fold request is invalid; the message says what to pass instead."""


def resolve_topic(name: str) -> str:
    """Topic name from a topic or table name (``orders`` -> ``oltp.public.orders``)."""
    topic = _ALIASES.get(name, name)
    if topic not in WINDOWED_TOPICS:
        raise FoldError(f"topic {name!r} feeds no event-time window; use one of {', '.join(sorted(_ALIASES))}")
    return topic


def window_start(value: datetime) -> datetime:
    """The hour window a timestamp belongs to; rejects timestamps that are not an hour start."""
    start = value.replace(minute=0, second=0, microsecond=0, tzinfo=None)
    if start != value.replace(tzinfo=None):
        raise FoldError(f"window start {value:%Y-%m-%d %H:%M:%S} is not an hour start; pass {start:%Y-%m-%dT%H:00}")
    return start


@dataclass(frozen=True)
class FoldResult:
    topic: str
    window_start: datetime
    late_events_before: int
    late_events_after: int
    newly_recorded: bool
    dbt: DbtRun | None


def _late_count(settings: Settings, topic: str, start: datetime) -> int:
    with duck.connect(settings.duckdb_path, settings=settings) as con:
        try:
            row = con.execute(
                "select count(*) from marts.late_events where topic = ? and window_start = ?", [topic, start]
            ).fetchone()
        except duckdb.CatalogException:  # no late_events built yet
            return 0
        return int(row[0]) if row else 0


def record_fold(settings: Settings, topic: str, start: datetime) -> bool:
    """Insert the fold into ops.folded_windows; False when the window was already folded."""
    with duck.connect(settings.duckdb_path, settings=settings) as con:
        ensure_ops_tables(con)
        inserted = con.execute(
            f"insert into {FOLDED_WINDOWS_TABLE} (topic, window_start, folded_at, folded_by) "
            "select $1, $2, now()::timestamp, $3 where not exists "
            f"(from {FOLDED_WINDOWS_TABLE} where topic = $1 and window_start = $2) returning topic",
            [topic, start, getpass.getuser()],
        ).fetchall()
        return bool(inserted)


def fold_window(
    settings: Settings, topic: str, start: datetime, *, build: bool = True, echo: Callable[[str], None] | None = None
) -> FoldResult:
    """Record the fold of (topic, window) and rebuild the windowed marts and late_events for that window."""
    topic = resolve_topic(topic)
    start = window_start(start)
    before = _late_count(settings, topic, start)
    recorded = record_fold(settings, topic, start)
    run = None
    if build:
        run = run_dbt(
            settings,
            # tag:affected: the affected sets are rebuilt too, so that no reader reads the run before's.
            ["build", "--select", "stg_folded_windows+ tag:affected"],
            {"refresh_window_starts": [start.strftime(VAR_TIME_FORMAT)]},
            echo=echo,
        )
    return FoldResult(topic, start, before, _late_count(settings, topic, start), recorded, run)
