"""What an ingest reports: per topic and hour counts, and the snapshot summary properties of its commits.

Every row value is a pure function of the landing files: the run id, fingerprint and counts go into snapshot
summary properties only (read by time travel and the Dagster metadata). The hour's file list is in its
``bronze.ingest_log`` rows, which the summary names: a summary is stored in every metadata.json for as long as its
snapshot is kept, so it holds nothing that grows with the hour.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
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
# Only on the commit of a range of hours (whose fingerprint property is then a JSON object: hour key -> fingerprint).
PROP_ARRIVAL_HOUR_END = "logistics.arrival-hour-end"
PROP_HOURS = "logistics.hours"
# Where the commit's input file list is: the ingest log's rows of its hours.
PROP_FILES_IN = "logistics.input-files-in"
# How the commit wrote each hour (append | replace; a JSON object hour key -> mode for a range), and for an append
# of one hour the files it read (the counts describe the whole hour after the commit).
PROP_MODE = "logistics.ingest-mode"
PROP_APPENDED_FILES = "logistics.appended-files"
PROP_APPENDED_LINES = "logistics.appended-lines"


@dataclass
class TopicReport:
    """What one topic's arrival hour turned into.

    ``files`` to ``late_events`` describe the whole hour after the ingest (what its ``bronze.ingest_log`` row
    says); ``read_*``, ``quarantined_by_reason``, ``corrupt_files``, ``data_files`` and ``written`` only what this
    ingest read and wrote: all of the hour for a replace, the new files for an append, nothing when unchanged.
    """

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
    # Files that cannot be read to their end -> why and where reading stopped. Each has one quarantine row
    # (reason corrupt_file) besides the ``quarantined`` lines; its complete lines before the damage are in ``lines``.
    corrupt_files: dict[str, str] = field(default_factory=dict)
    snapshot_id: int | None = None
    commit_attempts: int = 0


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

    @property
    def lines(self) -> int:
        """Lines read, all topics."""
        return sum(t.lines for t in self.topics.values())

    @property
    def rows(self) -> int:
        """Rows written, all topics."""
        return sum(t.rows for t in self.topics.values())

    @property
    def quarantined(self) -> int:
        """Lines quarantined, all topics."""
        return sum(t.quarantined for t in self.topics.values())

    @property
    def tombstones(self) -> int:
        """Tombstone lines (no row), all topics."""
        return sum(t.tombstones for t in self.topics.values())

    @property
    def read_files(self) -> int:
        """Landing files this ingest read, all topics."""
        return sum(len(t.read_files) for t in self.topics.values())

    @property
    def read_lines(self) -> int:
        """Lines this ingest read, all topics."""
        return sum(t.read_lines for t in self.topics.values())

    @property
    def corrupt_files(self) -> dict[str, str]:
        """Landing files that could not be read to their end -> why, all topics."""
        return {rel: why for t in self.topics.values() for rel, why in t.corrupt_files.items()}

    @property
    def quarantined_by_reason(self) -> dict[str, int]:
        """Quarantined lines per reason, all topics."""
        total: Counter[str] = Counter()
        for t in self.topics.values():
            total.update(t.quarantined_by_reason)
        return dict(sorted(total.items()))

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values."""
        d = asdict(self)
        d["arrival_hour"] = self.arrival_hour.isoformat()
        return d


def snapshot_properties(
    keys: Sequence[str], hours: Sequence[datetime], run_id: str | None, **counts: Any
) -> dict[str, str]:
    """Snapshot summary properties of a commit covering ``keys`` (one hour, or a range of them)."""
    if len(keys) == 1:
        props = {PROP_PARTITION_KEY: keys[0], PROP_ARRIVAL_HOUR: hours[0].isoformat()}
    else:
        props = {
            PROP_PARTITION_KEY: f"{keys[0]}..{keys[-1]}",
            PROP_ARRIVAL_HOUR: hours[0].isoformat(),
            PROP_ARRIVAL_HOUR_END: hours[-1].isoformat(),
            PROP_HOURS: str(len(keys)),
        }
    props.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in counts.items()})
    if run_id:
        props[PROP_RUN_ID] = run_id
    return props


def topic_counts(trs: Sequence[TopicReport], keys: Sequence[str]) -> dict[str, Any]:
    """The fingerprint and counts of one table's commit: as is for one hour; per hour for a range (the file
    lists are in the hours' ``bronze.ingest_log`` rows)."""
    fingerprints: Any = (
        trs[0].fingerprint if len(trs) == 1 else {k: t.fingerprint for k, t in zip(keys, trs, strict=True)}
    )
    files: dict[str, Any] = {PROP_FILES_IN: f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}"}
    modes: Any = trs[0].mode if len(trs) == 1 else {k: t.mode for k, t in zip(keys, trs, strict=True)}
    if len(trs) == 1 and trs[0].mode == "append":
        files[PROP_APPENDED_FILES] = trs[0].read_files
        files[PROP_APPENDED_LINES] = trs[0].read_lines
    return {
        PROP_FINGERPRINT: fingerprints,
        **files,
        PROP_MODE: modes,
        PROP_LINES: sum(t.lines for t in trs),
        PROP_ROWS: sum(t.rows for t in trs),
        PROP_QUARANTINED: sum(t.quarantined for t in trs),
        PROP_TOMBSTONES: sum(t.tombstones for t in trs),
    }
