"""What an ingest reports: per topic and hour counts, and the snapshot summary properties of its commits
(docs/internals/ingest.md, "Snapshot summary properties")."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from logistics_platform.lib.bronze import schema as bs

PROP_PARTITION_KEY = "logistics.partition-key"
PROP_ARRIVAL_HOUR = "logistics.arrival-hour"
PROP_FINGERPRINT = "logistics.input-fingerprint"
PROP_LINES = "logistics.lines"
PROP_ROWS = "logistics.rows"
PROP_QUARANTINED = "logistics.quarantined"
PROP_TOMBSTONES = "logistics.tombstones"
PROP_RUN_ID = "dagster.run-id"
PROP_ARRIVAL_HOUR_END = "logistics.arrival-hour-end"  # a range of hours only
PROP_HOURS = "logistics.hours"  # a range of hours only
PROP_FILES_IN = "logistics.input-files-in"  # where the input file list is: the ingest log
PROP_MODE = "logistics.ingest-mode"
PROP_APPENDED_FILES = "logistics.appended-files"
PROP_APPENDED_LINES = "logistics.appended-lines"


@dataclass
class TopicReport:
    """What one topic's arrival hour turned into: ``files`` to ``late_events`` the whole hour after the ingest (its
    ``bronze.ingest_log`` row), the rest what this ingest read and wrote (the new files only, for an append)."""

    table: str
    topic: str
    files: list[tuple[str, int]] = field(default_factory=list)
    fingerprint: str = ""
    bytes: int = 0
    lines: int = 0
    rows: int = 0
    quarantined: int = 0
    quarantined_by_reason: dict[str, int] = field(default_factory=dict)
    tombstones: int = 0
    late_events: int = 0
    mode: str = "replace"  # replace | append | unchanged (lib/bronze/increment.py)
    read_files: list[tuple[str, int]] = field(default_factory=list)
    read_lines: int = 0
    read_rows: int = 0
    read_quarantined: int = 0
    read_tombstones: int = 0
    read_fast_lines: int = 0  # of the lines read, those the vectorised clean path took (the rest went line by line)
    data_files: int = 0
    written: list[str] = field(default_factory=list)  # paths of the data files written
    added_columns: dict[str, str] = field(default_factory=dict)
    incidents: dict[str, dict[str, Any]] = field(default_factory=dict)  # column -> its first incompatible type
    # files that cannot be read to their end -> why (one quarantine row each, besides the ``quarantined`` lines)
    corrupt_files: dict[str, str] = field(default_factory=dict)
    snapshot_id: int | None = None
    commit_attempts: int = 0


def _total(attr: str, of: Callable[[Any], int] = int) -> Any:
    """A property: ``of`` each topic's ``attr``, summed over the report's topics."""
    return property(lambda report: sum(of(getattr(t, attr)) for t in report.topics.values()))


@dataclass
class IngestReport:
    """Result of ingesting one arrival hour: per-topic counts, snapshot ids and timing."""

    arrival_hour: datetime
    partition_key: str
    run_id: str | None
    mode: str = "replace"  # replace | append | unchanged, and why (lib/bronze/increment.py)
    mode_reason: str = ""
    topics: dict[str, TopicReport] = field(default_factory=dict)
    quarantine_written: list[str] = field(default_factory=list)  # paths of the quarantine data files written
    quarantine_snapshot_id: int | None = None
    ingest_log_snapshot_id: int | None = None
    duration_seconds: float = 0.0
    commit_seconds: dict[str, float] = field(default_factory=dict)  # bronze table -> its commit (attempts included)

    # Totals over the topics: the whole hours' lines, rows, quarantined lines and tombstones; what this ingest read.
    lines, rows, quarantined, tombstones = _total("lines"), _total("rows"), _total("quarantined"), _total("tombstones")
    read_files, read_lines = _total("read_files", len), _total("read_lines")

    @property
    def quarantined_by_reason(self) -> dict[str, int]:
        return dict(sorted(sum((Counter(t.quarantined_by_reason) for t in self.topics.values()), Counter()).items()))


def snapshot_properties(
    keys: Sequence[str], hours: Sequence[datetime], run_id: str | None, **counts: Any
) -> dict[str, str]:
    """Snapshot summary properties of a commit covering ``keys`` (one hour, or a range of them)."""
    props = {PROP_PARTITION_KEY: keys[0], PROP_ARRIVAL_HOUR: hours[0].isoformat()}
    if len(keys) > 1:
        props[PROP_PARTITION_KEY] = f"{keys[0]}..{keys[-1]}"
        props.update({PROP_ARRIVAL_HOUR_END: hours[-1].isoformat(), PROP_HOURS: str(len(keys))})
    props.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in counts.items()})
    if run_id:
        props[PROP_RUN_ID] = run_id
    return props


def per_hour(keys: Sequence[str], values: Sequence[Any]) -> Any:
    """The value of a one-hour commit, or hour key -> value for a range (how summary properties hold them)."""
    return values[0] if len(values) == 1 else dict(zip(keys, values, strict=True))


def topic_counts(trs: Sequence[TopicReport], keys: Sequence[str]) -> dict[str, Any]:
    """The fingerprint and counts of one table's commit."""
    out: dict[str, Any] = {
        PROP_FINGERPRINT: per_hour(keys, [t.fingerprint for t in trs]),
        PROP_FILES_IN: f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}",
        PROP_MODE: per_hour(keys, [t.mode for t in trs]),
        PROP_LINES: sum(t.lines for t in trs),
        PROP_ROWS: sum(t.rows for t in trs),
        PROP_QUARANTINED: sum(t.quarantined for t in trs),
        PROP_TOMBSTONES: sum(t.tombstones for t in trs),
    }
    if len(trs) == 1 and trs[0].mode == "append":
        out[PROP_APPENDED_FILES], out[PROP_APPENDED_LINES] = trs[0].read_files, trs[0].read_lines
    return out
