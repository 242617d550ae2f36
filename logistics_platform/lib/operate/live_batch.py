"""Which newly ingested hours a live SLA micro-batch builds: the live sensor's decision, as pure functions.

The live path builds only the dbt models the SLA mart needs, for the hours just ingested, so that a breach in a
landed file reaches the alert within a minute; the full transform batch builds every model at its own pace. Only
*live* hours go this way (the hour in progress and the ones just before it): an older hour ingested again (a
backfill, a delayed upload) has no live SLA window to watch and waits for the full batch.

The sensor's cursor is the storage id of the newest ``bronze/ingest_log`` materialization it has acted on: ids only
grow, so every ingest after it is new to the sensor, and each ingest is taken once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from logistics_platform.lib.timekeys import hour_key, hour_start

# Hours this far back from the hour in progress still hold a live SLA window (the one that just closed may still
# receive its last files from the sink).
LIVE_HOURS = 2


@dataclass(frozen=True)
class LiveBatch:
    """The hours a live SLA run builds (hour keys, sorted) and the newest ingest id it covers."""

    hours: tuple[str, ...]
    watermark: int

    @property
    def run_key(self) -> str:
        """One run per newest ingest: a repeated tick (or a lost cursor) asks Dagster for the same run again."""
        return f"sla_live:{self.hours[0]}..{self.hours[-1]}:{self.watermark}"


def load_cursor(raw: str | None) -> int:
    """The storage id in a live sensor cursor (0 when there is none or it is unreadable)."""
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0


def live_batch(ingested: Mapping[str, int], after: int, now: datetime) -> tuple[LiveBatch | None, int]:
    """The live hours with an ingest newer than ``after``, and the next cursor (the newest ingest id seen).

    ``ingested`` maps hour key -> storage id of its latest ingest; a first tick (``after`` 0) takes the live hours
    already ingested, the older history being the full batch's work.
    """
    cursor = max(after, max(ingested.values(), default=after))
    oldest = hour_key(hour_start(now) - timedelta(hours=LIVE_HOURS - 1))
    current = hour_key(hour_start(now))
    hours = sorted(h for h, sid in ingested.items() if sid > after and oldest <= h <= current)
    if not hours:
        return None, cursor
    return LiveBatch(tuple(hours), max(ingested[h] for h in hours)), cursor
