"""Which ingested arrival hours wait for a transform run: the transform sensor's bookkeeping, as pure functions.

Bronze is partitioned by arrival hour and the dbt layer by arrival day, and a transform run builds a window of hours
inside its days: the status of a day partition does not say which of its hours were built since their last ingest.
So the sensor keeps, per hour, the newest ingest that a successful transform run is known to have built:

* an ingest is identified by the storage id of its ``bronze/ingest_log`` materialization in Dagster's event log
  (ids only grow, and one is written after the hour's Iceberg commit);
* a transform run records its *ingest watermark*, the newest such id when its dbt step started (before dbt read
  bronze): every ingest up to it was committed before dbt read, so the run built those of its window's hours;
* an hour is pending while its latest ingest id is above the watermark of every successful run that covered it.

An hour ingested while a run is in flight has a newer id than that run's watermark, and a failed run is never
counted, so no ingested hour is lost; at worst an hour is built twice (every window is idempotent).

The state lives in the sensor's cursor and grows with the lookback, not with history: hours older than
:data:`KEEP_DAYS` before the newest ingested hour are dropped once built, and :attr:`BuiltState.floor` stands for
them (the newest ingest id among the dropped hours; any later ingest of one of them has a higher id).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from logistics_platform.lib.timekeys import hour_key, parse_hour_key

# The run tag of a transform run's ingest watermark (written by its dbt step when it builds every model).
WATERMARK_TAG = "logistics/ingest_watermark"
STATE_VERSION = 1
# Hours this far behind the newest ingested hour leave the cursor once built (a delayed file lands within hours).
KEEP_DAYS = 7
# Runs are folded in again from this long before the newest one seen: a run record written with an older update
# time than one already read (clocks of the processes that write them) is still folded. Folding is idempotent.
FOLD_OVERLAP_SECONDS = 300.0


@dataclass
class BuiltState:
    """Per arrival hour, the newest ingest (watermark) a successful transform run built."""

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

    def fold_after(self) -> float | None:
        """Epoch seconds from which finished runs are read again on the next tick (None: read every run)."""
        return None if self.seen_until is None else self.seen_until - FOLD_OVERLAP_SECONDS


def pending_hours(ingested: Mapping[str, int], state: BuiltState) -> dict[str, int]:
    """Hour -> latest ingest id, for the ingested hours whose latest ingest no successful run has built yet."""
    return {h: sid for h, sid in ingested.items() if sid > state.built_through(h)}


def prune(state: BuiltState, ingested: Mapping[str, int], keep_days: int = KEEP_DAYS) -> BuiltState:
    """``state`` without the built hours older than ``keep_days`` before the newest ingested hour.

    A dropped hour raises the floor to its latest ingest id, so it stays built (a dropped hour never ingested, from
    a backfill of days that reached ahead of the landed files, needs nothing). Pending hours are never dropped.
    """
    if not ingested:
        return state
    cutoff = hour_key(parse_hour_key(max(ingested)) - timedelta(days=keep_days))
    kept: dict[str, int] = {}
    floor = state.floor
    for hour, watermark in state.built.items():
        if hour >= cutoff or ingested.get(hour, 0) > watermark:
            kept[hour] = watermark
        else:
            floor = max(floor, ingested.get(hour, 0))
    if floor > state.floor:
        # The floor stands for every hour outside ``kept``: a pending hour it would now hide is kept explicitly.
        for hour, sid in ingested.items():
            if hour not in kept and sid > state.built_through(hour):
                kept[hour] = state.built_through(hour)
    return BuiltState(built=kept, floor=floor, seen_until=state.seen_until)


def load_state(raw: str | None) -> BuiltState | None:
    """The state in a sensor cursor; None when there is none or it is unreadable (then it is rebuilt from runs)."""
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or data.get("v") != STATE_VERSION or not isinstance(data.get("built"), dict):
        return None
    seen = data.get("seen_until")
    return BuiltState(
        built={str(h): int(w) for h, w in data["built"].items()},
        floor=int(data.get("floor", 0)),
        seen_until=float(seen) if seen is not None else None,
    )


def dump_state(state: BuiltState) -> str:
    """The state as a sensor cursor."""
    built = dict(sorted(state.built.items()))
    data = {"v": STATE_VERSION, "floor": state.floor, "seen_until": state.seen_until, "built": built}
    return json.dumps(data, separators=(",", ":"))
