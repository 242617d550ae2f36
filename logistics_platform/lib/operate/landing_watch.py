"""Which arrival hours need an ingest run, and the landing scan it is decided from (see docs/internals/operate.md)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from logistics_platform.lib.timekeys import hour_key, hour_start, parse_hour_key

CURSOR_VERSION = 1
# Days before the newest landed hour that the cursor and the per-tick scan keep (older hours are settled).
LOOKBACK_DAYS = 7
_DT = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})$")
_HR = re.compile(r"^hr=([01]\d|2[0-3])$")


def combine_fingerprints(topic_fingerprints: Mapping[str, str]) -> str:
    """One fingerprint for an arrival hour from the per-topic fingerprints (order-independent)."""
    digest = hashlib.sha256()
    for topic in sorted(topic_fingerprints):
        digest.update(f"{topic}={topic_fingerprints[topic]}\n".encode())
    return digest.hexdigest()


def ingest_run_key(hour: str, fingerprint: str) -> str:
    """Run key of an ingest request: one run per (hour, file set)."""
    return f"ingest:{hour}:{fingerprint[:16]}"


@dataclass(frozen=True)
class HourRequest:
    hour: str
    fingerprint: str
    reason: str  # "new" or "changed"

    @property
    def run_key(self) -> str:
        return ingest_run_key(self.hour, self.fingerprint)


def load_cursor(raw: str | None) -> dict[str, str]:
    """Hour -> fingerprint from a sensor cursor; an unreadable or old-format cursor starts empty."""
    try:
        data = json.loads(raw) if raw else {}
        return {str(k): str(v) for k, v in data["hours"].items()} if data.get("v") == CURSOR_VERSION else {}
    except (ValueError, KeyError, AttributeError):
        return {}


def dump_cursor(hours: Mapping[str, str], open_request: tuple[str, float] | None = None) -> str:
    """The cursor: hour -> fingerprint, and (hour, epoch seconds) of the last request of the hour then in progress."""
    data = {
        "v": CURSOR_VERSION,
        "hours": dict(sorted(hours.items())),
        **({"open": open_request} if open_request else {}),
    }
    return json.dumps(data, separators=(",", ":"))


def last_open_request(raw: str | None) -> tuple[str, float] | None:
    """(hour, epoch seconds) of the last request of the hour then in progress, from a cursor; None if none."""
    try:
        hour, at = json.loads(raw)["open"] if raw else (None, 0)
        return (str(hour), float(at)) if hour is not None else None
    except (ValueError, KeyError, TypeError):
        return None


def held_hour(last: tuple[str, float] | None, now: datetime, interval_seconds: float) -> str | None:
    """The hour in progress when it was last requested less than ``interval_seconds`` before ``now``: its changes
    wait for the next request, so that what lands in between is committed once (one commit per table)."""
    hour = hour_key(now)
    return hour if last is not None and last[0] == hour and now.timestamp() - last[1] < interval_seconds else None


def plan_ingest_requests(
    landed: Mapping[str, str], cursor: Mapping[str, str], held: str | None = None
) -> tuple[list[HourRequest], dict[str, str]]:
    """Requests for the ``landed`` hours (hour -> fingerprint) new or changed since the ``cursor``, and the next cursor:
    both, without the hours older than LOOKBACK_DAYS before the newest. A change of the ``held`` hour waits (it keeps
    its cursor entry); its first sighting does not."""
    held = held if held in cursor else None
    requests = [
        HourRequest(h, fp, "new" if h not in cursor else "changed")
        for h, fp in sorted(landed.items())
        if cursor.get(h) != fp and h != held
    ]
    merged = {**cursor, **{h: fp for h, fp in landed.items() if h != held}}
    start = hour_key(parse_hour_key(max(merged)) - timedelta(days=LOOKBACK_DAYS)) if merged else ""
    return requests, {h: fp for h, fp in merged.items() if h >= start}


def hours_to_reconcile(scheduled_time: datetime, count: int = 2) -> list[str]:
    """The hour that just closed and the ``count - 1`` before it, for a tick at ``scheduled_time``."""
    top = hour_start(scheduled_time)
    return [hour_key(top - timedelta(hours=i)) for i in range(count, 0, -1)]


def stale_topics(landed: Mapping[str, str], ingested: Mapping[str, str]) -> dict[str, str]:
    """Per topic of one hour: "never" (not ingested) or "changed" (files differ from the ingest log)."""
    return {t: "never" if t not in ingested else "changed" for t, fp in landed.items() if ingested.get(t) != fp}


def hour_folders(landing_dir: Path) -> tuple[list[tuple[str, datetime]], dict[str, str]]:
    """(topic, arrival hour) of every ``dt=YYYY-MM-DD/hr=HH`` folder under the read topics' folders; and folder
    (relative to ``landing_dir``) -> why it is not one, for the others (a sink's ``.``/``_``/``+`` temporaries aside).
    """
    from logistics_platform.lib.bronze.landing import TOPICS_DIR, topic_specs

    root = Path(landing_dir) / TOPICS_DIR
    hours: list[tuple[str, datetime]] = []
    malformed: dict[str, str] = {}

    def folders(parent: Path) -> list[Path]:  # scandir: each entry's type without a stat (a year is 100k folders)
        with os.scandir(parent) as entries:
            return sorted(Path(e.path) for e in entries if e.is_dir() and not e.name.startswith((".", "_", "+")))

    for topic in (spec.topic for spec in topic_specs(landing_dir).values()):  # outside the contract too
        if not (root / topic).is_dir():
            continue
        for day in folders(root / topic):
            where = str(day.relative_to(landing_dir))
            m = _DT.match(day.name)
            if not m:
                malformed[where] = "not a dt=YYYY-MM-DD folder"
                continue
            try:
                midnight = datetime.strptime(m[1], "%Y-%m-%d")
            except ValueError:
                malformed[where] = f"{m[1]} is not a date"
                continue
            for hour in folders(day):
                if h := _HR.match(hour.name):
                    hours.append((topic, midnight + timedelta(hours=int(h[1]))))
                else:
                    malformed[str(hour.relative_to(landing_dir))] = "not an hr=00..23 folder"
    return hours, malformed


def scan_landing(
    landing_dir: Path, lookback_days: int | None = LOOKBACK_DAYS, hours: Iterable[str] | None = None
) -> dict[str, dict[str, str]]:
    """Hour key -> {topic: fingerprint (the hash ``bronze.ingest_log`` records)} of the landing zone's known topics,
    within ``lookback_days`` of the newest day folder (None: all) and, given ``hours``, those hour keys only."""
    from logistics_platform.lib.bronze.landing import fingerprint, list_hour_files

    folders, _ = hour_folders(landing_dir)
    if lookback_days is not None and folders:
        oldest = max(hour for _, hour in folders).replace(hour=0) - timedelta(days=lookback_days + 1)
        folders = [f for f in folders if f[1] >= oldest]
    wanted = {parse_hour_key(h) for h in hours} if hours is not None else None
    out: dict[str, dict[str, str]] = {}
    for topic, hour in folders:
        if wanted is not None and hour not in wanted:
            continue
        files = list_hour_files(Path(landing_dir), topic, hour)
        if files:
            out.setdefault(hour_key(hour), {})[topic] = fingerprint(files)
    return out


def partition_hours(hours: Iterable[str], first: str, now: datetime) -> tuple[list[str], dict[str, str]]:
    """(the hour keys that are partitions at ``now``: ``first`` through the hour in progress, sorted; hour key ->
    why not, for the others)."""
    open_hour = hour_key(now)
    taken: list[str] = []
    skipped: dict[str, str] = {}
    for hour in sorted(set(hours)):
        if hour < first:
            skipped[hour] = f"before PARTITIONS_START={first}"
        elif hour > open_hour:
            skipped[hour] = f"after the hour in progress ({open_hour}): the sink's clock is ahead of this host's"
        else:
            taken.append(hour)
    return taken, skipped


# Dagster's tags on a run of a partition range (a backfill or `run` taking several hours in one run).
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
PARTITION_TAG = "dagster/partition"


def run_partition_bounds(tags: Mapping[str, str]) -> tuple[str, str] | None:
    """(first, last) partition key of a run with these tags: its one partition twice, or its range; None if none."""
    if tags.get(PARTITION_TAG):
        return tags[PARTITION_TAG], tags[PARTITION_TAG]
    start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    return (start, end) if start and end else None


def run_covers_hour(tags: Mapping[str, str], hour: str) -> bool:
    """Whether a run with these tags ingests arrival hour ``hour`` (hour keys sort as their hours do)."""
    bounds = run_partition_bounds(tags)
    return bounds is not None and bounds[0] <= hour <= bounds[1]
