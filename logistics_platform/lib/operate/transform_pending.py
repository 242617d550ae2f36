"""The dbt triggers' state: which ingested hours wait for a transform run (protocol: docs/internals/operate.md)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from logistics_platform.lib.timekeys import hour_key, hour_start, parse_hour_key
from logistics_platform.lib.transform.arrival_window import run_window

# The run tag of a transform run's ingest watermark (written by its dbt step when it builds every model).
WATERMARK_TAG = "logistics/ingest_watermark"
STATE_VERSION = 1
# Built hours this far behind the newest ingested hour leave the cursor (a delayed file lands within hours).
KEEP_DAYS = 7
# Runs are folded in again from this long before the newest one seen (the clocks of the writers differ); idempotent.
FOLD_OVERLAP_SECONDS = 300.0
# The hour in progress and the one before it (still receiving the sink's last files) hold a live SLA window.
LIVE_HOURS = 2


@dataclass
class BuiltState:
    """Per arrival hour, the newest ingest (watermark) a successful transform run built (the sensor's cursor)."""

    built: dict[str, int] = field(default_factory=dict)
    floor: int = 0  # the watermark of every hour not in ``built`` (hours dropped from the cursor once built)
    seen_until: float | None = None  # update time (epoch seconds) of the newest transform run folded in

    def built_through(self, hour: str) -> int:
        """The newest ingest of ``hour`` known to be built."""
        return self.built.get(hour, self.floor)

    def fold(self, hours: Iterable[str], watermark: int, updated: float | None = None) -> None:
        """Record that a successful run built ``hours`` with every ingest up to ``watermark`` in bronze."""
        for hour in hours:
            if watermark > self.built_through(hour):
                self.built[hour] = watermark
        if updated is not None:
            self.seen_until = updated if self.seen_until is None else max(self.seen_until, updated)

    def fold_run(self, tags: Mapping[str, str], updated: float) -> None:
        """Fold in a successful transform run by its tags: one without a watermark (a subset) built nothing."""
        watermark = tags.get(WATERMARK_TAG)
        window = run_window(tags) if watermark else None
        self.fold(window.hour_keys() if window else (), int(watermark or 0), updated)

    def fold_after(self) -> float | None:
        """Epoch seconds from which finished runs are read again on the next tick (None: read every run)."""
        return None if self.seen_until is None else self.seen_until - FOLD_OVERLAP_SECONDS

    def pending(self, ingested: Mapping[str, int]) -> dict[str, int]:
        """Hour -> latest ingest id, for the ingested hours whose latest ingest no successful run has built yet."""
        return {h: sid for h, sid in ingested.items() if sid > self.built_through(h)}

    def prune(self, ingested: Mapping[str, int], keep_days: int = KEEP_DAYS) -> BuiltState:
        """Without the built hours older than ``keep_days`` before the newest ingested hour (the floor stands for them);
        pending hours are never dropped, and a rising floor keeps every pending hour it would hide explicitly."""
        if not ingested:
            return self
        cutoff = hour_key(parse_hour_key(max(ingested)) - timedelta(days=keep_days))
        kept: dict[str, int] = {}
        floor = self.floor
        for hour, watermark in self.built.items():
            if hour >= cutoff or ingested.get(hour, 0) > watermark:
                kept[hour] = watermark
            else:
                floor = max(floor, ingested.get(hour, 0))
        if floor > self.floor:
            kept |= {h: self.built_through(h) for h in self.pending(ingested) if h not in kept}
        return BuiltState(built=kept, floor=floor, seen_until=self.seen_until)

    def dump(self) -> str:
        """The state as a sensor cursor."""
        built = dict(sorted(self.built.items()))
        data = {"v": STATE_VERSION, "floor": self.floor, "seen_until": self.seen_until, "built": built}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def load(cls, raw: str | None) -> BuiltState | None:
        """The state in a sensor cursor; None when there is none or it is unreadable (then it is rebuilt from runs)."""
        try:
            data = json.loads(raw) if raw else None
            if data is None or data.get("v") != STATE_VERSION:
                return None
            seen = data.get("seen_until")
            built = {str(h): int(w) for h, w in data["built"].items()}
            return cls(built, int(data.get("floor", 0)), None if seen is None else float(seen))
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


@dataclass(frozen=True)
class LiveBatch:
    """The hours a live SLA run builds (hour keys, sorted) and the newest ingest id it covers."""

    hours: tuple[str, ...]
    watermark: int

    @property
    def run_key(self) -> str:
        """One run per newest ingest: a repeated tick (or a lost cursor) asks Dagster for the same run again."""
        return f"sla_live:{self.hours[0]}..{self.hours[-1]}:{self.watermark}"


def live_cursor(raw: str | None) -> int:
    """The newest ingest id a live sensor cursor holds (0 when there is none or it is unreadable)."""
    return int(raw) if raw and raw.isdecimal() else 0


def live_batch(ingested: Mapping[str, int], after: int, now: datetime) -> tuple[LiveBatch | None, int]:
    """The live hours with an ingest newer than ``after`` (0: every live hour ingested), and the next cursor."""
    cursor = max(after, max(ingested.values(), default=after))
    oldest, current = hour_key(hour_start(now) - timedelta(hours=LIVE_HOURS - 1)), hour_key(hour_start(now))
    hours = sorted(h for h, sid in ingested.items() if sid > after and oldest <= h <= current)
    return (LiveBatch(tuple(hours), max(ingested[h] for h in hours)) if hours else None), cursor


def builders(runs: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """Hour -> a successful run (of ``runs``: id -> tags) with its newest watermark: what a rebuilt cursor reads."""
    best: dict[str, tuple[int, str]] = {}
    for run, tags in runs.items():
        if (watermark := tags.get(WATERMARK_TAG)) and (window := run_window(tags)):
            for hour in window.hour_keys():
                best[hour] = max(best.get(hour, (0, "")), (int(watermark), run))
    return {hour: run for hour, (_, run) in best.items()}
