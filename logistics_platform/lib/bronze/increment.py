"""Planning an ingest hour by hour: append the new files, leave it unchanged, or replace the whole hour, so that
appends are exactly-once across crashes (docs/internals/ingest.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pyiceberg.catalog import Catalog
from pyiceberg.expressions import And, EqualTo
from pyiceberg.table import Table

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.commit import HourFiles, hour_files
from logistics_platform.lib.bronze.ingest_log import IngestLogEntry, read_log_entries
from logistics_platform.lib.bronze.landing import LandingFile
from logistics_platform.lib.bronze.tables import hour_column
from logistics_platform.lib.timekeys import hour_key

REPLACE = "replace"
APPEND = "append"
UNCHANGED = "unchanged"
NOT_INGESTED = "not ingested before"


@dataclass
class HourPlan:
    """What one ingest does to one arrival hour, and why."""

    hour: datetime
    mode: str  # REPLACE | APPEND | UNCHANGED
    reason: str
    # table -> the landing files to read: all of the hour's for a replace, the new ones for an append
    read: dict[str, list[LandingFile]] = field(default_factory=dict)
    # table -> the hour's log row before this ingest (append, unchanged)
    logged: dict[str, IngestLogEntry] = field(default_factory=dict)
    # table name (topics, quarantine, ingest log) -> the hour's live files the append was planned on
    base: dict[str, frozenset[str]] = field(default_factory=dict)
    # table name -> the snapshot ``base`` was read from (a commit onto that same snapshot needs no re-check)
    planned_on: dict[str, int | None] = field(default_factory=dict)


def _replace(hour: datetime, landed: Mapping[str, list[LandingFile]], reason: str) -> HourPlan:
    return HourPlan(hour, REPLACE, reason, read={t: list(fs) for t, fs in landed.items()})


def _against_log(landed: Mapping[str, list[LandingFile]], logged: Mapping[str, IngestLogEntry]) -> str:
    """Why the landed files of an ingested hour are not the logged ones plus new ones ('' when they are)."""
    for table, entry in logged.items():
        now = {f.relpath: f.size for f in landed.get(table, [])}
        for rel, size in entry.files:
            if rel not in now:
                return f"{rel} was ingested but is no longer landed"
            if now[rel] != size:
                return f"{rel} changed size since its ingest ({size:,} -> {now[rel]:,} bytes)"
    return ""


def plan_hours(
    catalog: Catalog,
    tables: Mapping[str, Table],
    hours: Sequence[datetime],
    landed: Sequence[Mapping[str, list[LandingFile]]],
    replace: bool = False,
) -> list[HourPlan]:
    """One plan per hour of ``hours`` (``landed[i]``: table -> the files landed for ``hours[i]``)."""
    if replace:
        return [_replace(h, fs, "full re-ingest requested") for h, fs in zip(hours, landed, strict=True)]
    log = read_log_entries(catalog, hours)
    plans: list[HourPlan] = []
    candidates: list[HourPlan] = []
    for hour, files in zip(hours, landed, strict=True):
        key = hour_key(hour)
        logged = {t: e for (topic, k), e in log.items() if k == key and (t := bs.spec_of(topic).table) in files}
        if why := (_against_log(files, logged) if logged else NOT_INGESTED):
            plans.append(_replace(hour, files, why))
            continue
        known = {rel for e in logged.values() for rel, _ in e.files}
        read = {t: [f for f in fs if f.relpath not in known] for t, fs in files.items()}
        plan = HourPlan(hour, APPEND, "new files", read=read, logged=logged)
        plans.append(plan)
        candidates.append(plan)
    if candidates:
        _check_tables(tables, candidates, dict(zip(hours, landed, strict=True)))
    for plan in candidates:
        if plan.mode == APPEND and not any(plan.read.values()):
            plan.mode, plan.reason = UNCHANGED, "no new files"
    return plans


def _check_tables(
    tables: Mapping[str, Table], plans: list[HourPlan], landed: Mapping[datetime, Mapping[str, list[LandingFile]]]
) -> None:
    """Demote to a replace every plan whose hour the tables do not hold exactly as logged (one scan plan a table)."""
    states = {name: hour_files(table, hour_column(name), [p.hour for p in plans]) for name, table in tables.items()}
    for plan in plans:
        if why := _mismatch(tables, {name: s[plan.hour] for name, s in states.items()}, plan):
            plan.mode, plan.reason, plan.logged, plan.base, plan.planned_on = REPLACE, why, {}, {}, {}
            plan.read = _replace(plan.hour, landed[plan.hour], why).read


def _mismatch(tables: Mapping[str, Table], states: Mapping[str, HourFiles], plan: HourPlan) -> str:
    """Why the tables do not hold the hour as logged ('' when they do: their files are noted in ``plan.base``)."""
    for name, state in states.items():
        if state.mixed:
            return f"bronze.{name} holds the hour in files shared with other hours (compacted)"
        expected = _expected_rows(name, plan)
        if name == bs.QUARANTINE_TABLE and state.records > expected:
            if (damaged := _damaged_file_rows(tables[name], plan)) is None:
                return "bronze.quarantine holds a damaged-file row of a file bronze.ingest_log does not list"
            expected += damaged
        if state.records != expected:
            return (
                f"bronze.{name} holds {state.records:,} rows of the hour where bronze.ingest_log accounts for "
                f"{expected:,} (an earlier ingest stopped between its commits)"
            )
        plan.base[name] = state.paths
        plan.planned_on[name] = tables[name].metadata.current_snapshot_id
    return ""


def _expected_rows(name: str, plan: HourPlan) -> int:
    """Rows of the hour that ``bronze.<name>`` holds when it is exactly what the log says (damaged files aside)."""
    if name == bs.INGEST_LOG_TABLE:
        return len(plan.logged)
    if name == bs.QUARANTINE_TABLE:
        return sum(e.quarantined for e in plan.logged.values())
    entry = plan.logged.get(name)
    return entry.rows if entry is not None else 0


def _damaged_file_rows(quarantine: Table, plan: HourPlan) -> int | None:
    """The hour's ``corrupt_file`` quarantine rows when each names a logged file of its topic, else None."""
    rows = (
        quarantine.scan(
            row_filter=And(EqualTo("_arrival_hour", plan.hour.isoformat()), EqualTo("reason", bs.REASON_CORRUPT_FILE)),
            selected_fields=("_topic", "_source_file"),
        )
        .to_arrow()
        .to_pylist()
    )
    logged = {(e.topic, rel) for e in plan.logged.values() for rel, _ in e.files}
    if any((r["_topic"], r["_source_file"]) not in logged for r in rows):
        return None
    return len(rows)
