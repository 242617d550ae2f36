"""Discovery of Kafka Connect landing files (pure functions over a directory tree).

Layout (sources.md): ``topics/<topic>/dt=YYYY-MM-DD/hr=HH/<topic>+<partition>+<start_offset>.json[.gz]``.
The ``dt=/hr=`` folder is the arrival hour. Files never change once written, so a file set is identified by
its relative names and sizes (:func:`fingerprint`). Names that do not follow the pattern (uploads in flight,
``.tmp`` files, stray objects) are skipped by discovery and can be listed with :func:`unexpected_files`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, cast

TOPICS_DIR = "topics"
_FILE_RE = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)\+(?P<partition>\d+)\+(?P<offset>\d{10,})\.json(?P<gz>\.gz)?$")
_DT_RE = re.compile(r"^dt=(\d{4}-\d{2}-\d{2})$")
_HR_RE = re.compile(r"^hr=(\d{2})$")


@dataclass(frozen=True, order=True)
class LandingFile:
    """One landed file: where it is, and what its name and folder say about it."""

    relpath: str  # relative to the landing root, POSIX separators: the stable name used in fingerprints and rows
    topic: str
    arrival_hour: datetime  # naive UTC, start of the hour
    kafka_partition: int
    start_offset: int
    size: int
    path: Path

    @property
    def gzipped(self) -> bool:
        return self.relpath.endswith(".gz")

    def open(self) -> IO[bytes]:
        """Binary stream of the file's content, decompressed when gzipped."""
        # The caller owns the stream (it is used as a context manager there).
        return cast(IO[bytes], gzip.open(self.path, "rb")) if self.gzipped else open(self.path, "rb")


class LandingPathError(ValueError):
    """A path does not follow the Kafka Connect landing layout."""


def to_utc_naive(value: datetime) -> datetime:
    """Normalise a datetime to naive UTC (Iceberg ``timestamp`` without zone), truncating nothing."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def hour_start(value: datetime) -> datetime:
    """The naive-UTC start of the hour containing ``value``."""
    return to_utc_naive(value).replace(minute=0, second=0, microsecond=0)


def hour_dir(topic: str, arrival_hour: datetime) -> str:
    """Relative folder of one topic's arrival hour: ``topics/<topic>/dt=YYYY-MM-DD/hr=HH``."""
    h = hour_start(arrival_hour)
    return f"{TOPICS_DIR}/{topic}/dt={h:%Y-%m-%d}/hr={h:%H}"


def parse_landing_path(relpath: str) -> tuple[str, datetime, int, int]:
    """(topic, arrival hour, kafka partition, start offset) from a path relative to the landing root."""
    parts = relpath.replace("\\", "/").split("/")
    if len(parts) != 5 or parts[0] != TOPICS_DIR:
        raise LandingPathError(f"{relpath!r}: expected topics/<topic>/dt=YYYY-MM-DD/hr=HH/<file>")
    _, topic, dt_part, hr_part, name = parts
    dt_m, hr_m, file_m = _DT_RE.match(dt_part), _HR_RE.match(hr_part), _FILE_RE.match(name)
    if not dt_m or not hr_m:
        raise LandingPathError(f"{relpath!r}: folder must be dt=YYYY-MM-DD/hr=HH")
    if not file_m:
        raise LandingPathError(f"{relpath!r}: file name must be <topic>+<partition>+<10-digit offset>.json[.gz]")
    if file_m["topic"] != topic:
        raise LandingPathError(f"{relpath!r}: file topic {file_m['topic']!r} differs from folder topic {topic!r}")
    try:
        hour = datetime.strptime(dt_m[1], "%Y-%m-%d") + timedelta(hours=int(hr_m[1]))
    except ValueError:
        raise LandingPathError(f"{relpath!r}: {dt_part} is not a date") from None
    if int(hr_m[1]) > 23:
        raise LandingPathError(f"{relpath!r}: hour {hr_m[1]} is not 00..23")
    return topic, hour, int(file_m["partition"]), int(file_m["offset"])


def landing_file(landing_dir: Path, path: Path) -> LandingFile:
    """Describe one file under ``landing_dir`` (raises :class:`LandingPathError` when the name is foreign)."""
    rel = path.relative_to(landing_dir).as_posix()
    topic, hour, partition, offset = parse_landing_path(rel)
    return LandingFile(rel, topic, hour, partition, offset, path.stat().st_size, path)


def list_hour_files(landing_dir: Path, topic: str, arrival_hour: datetime) -> list[LandingFile]:
    """The landing files of one topic and arrival hour, ordered by (partition, start offset)."""
    folder = Path(landing_dir) / hour_dir(topic, arrival_hour)
    if not folder.is_dir():
        return []
    out = []
    for p in folder.iterdir():
        if p.is_file() and _FILE_RE.match(p.name):
            try:
                out.append(landing_file(Path(landing_dir), p))
            except LandingPathError:
                continue
    return sorted(out, key=lambda f: (f.kafka_partition, f.start_offset, f.relpath))


def unexpected_files(landing_dir: Path, topic: str, arrival_hour: datetime) -> list[str]:
    """Names in an hour folder that discovery skips (not ``<topic>+<partition>+<offset>.json[.gz]``)."""
    folder = Path(landing_dir) / hour_dir(topic, arrival_hour)
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if not (p.is_file() and _FILE_RE.match(p.name)))


def list_arrival_hours(landing_dir: Path, topics: Iterable[str] | None = None) -> list[datetime]:
    """Sorted arrival hours that hold at least one landing file (of ``topics``, default all)."""
    root = Path(landing_dir) / TOPICS_DIR
    if not root.is_dir():
        return []
    wanted = set(topics) if topics is not None else None
    hours: set[datetime] = set()
    for topic_dir in root.iterdir():
        if not topic_dir.is_dir() or (wanted is not None and topic_dir.name not in wanted):
            continue
        for dt_dir in topic_dir.iterdir():
            dt_m = _DT_RE.match(dt_dir.name)
            if not dt_m or not dt_dir.is_dir():
                continue
            for hr_dir in dt_dir.iterdir():
                hr_m = _HR_RE.match(hr_dir.name)
                if not hr_m or int(hr_m[1]) > 23 or not hr_dir.is_dir():
                    continue
                if any(p.is_file() and _FILE_RE.match(p.name) for p in hr_dir.iterdir()):
                    try:
                        day = datetime.strptime(dt_m[1], "%Y-%m-%d")
                    except ValueError:
                        continue
                    hours.add(day + timedelta(hours=int(hr_m[1])))
    return sorted(hours)


def fingerprint(files: Iterable[LandingFile]) -> str:
    """Deterministic hash of a file set: relative names and sizes, order-independent."""
    return fingerprint_of((f.relpath, f.size) for f in files)


def fingerprint_of(pairs: Iterable[tuple[str, int]]) -> str:
    """:func:`fingerprint` of (relative path, size) pairs (e.g. as recorded in bronze.ingest_log)."""
    h = hashlib.sha256()
    for rel, size in sorted(pairs):
        h.update(f"{rel}\t{size}\n".encode())
    return h.hexdigest()


def iter_lines(f: LandingFile) -> Iterator[bytes]:
    """The file's lines as bytes, without the line terminator; a final line without newline counts."""
    with f.open() as stream:
        for raw in stream:
            yield raw[:-1] if raw.endswith(b"\n") else raw


def is_tombstone_line(raw: bytes) -> bool:
    """Whether a line is a Kafka tombstone: ``null``, or a schema/payload envelope whose payload is null.

    Deliberately independent of the envelope parser: the accounting check counts tombstones with it.
    """
    s = raw.strip(b" \t\n\r")  # JSON whitespace only, as the envelope parser
    if s == b"null":
        return True
    if b'"payload"' not in s:
        return False
    try:
        value = json.loads(s)
    except ValueError:
        return False
    return isinstance(value, dict) and value.keys() == {"schema", "payload"} and value["payload"] is None


def count_lines(f: LandingFile) -> tuple[int, int]:
    """(lines, tombstones) of one file, counted straight from its bytes."""
    lines = tombstones = 0
    for raw in iter_lines(f):
        lines += 1
        if is_tombstone_line(raw):
            tombstones += 1
    return lines, tombstones


def hour_partition_key(arrival_hour: datetime) -> str:
    """Dagster hourly partition key (``YYYY-MM-DD-HH:MM``) of an arrival hour."""
    return f"{hour_start(arrival_hour):%Y-%m-%d-%H:%M}"


def parse_partition_key(key: str) -> datetime:
    """Arrival hour (naive UTC) of a Dagster hourly partition key."""
    try:
        return datetime.strptime(key, "%Y-%m-%d-%H:%M")
    except ValueError:
        raise ValueError(f"partition key {key!r}: expected YYYY-MM-DD-HH:MM, e.g. 2026-11-01-05:00") from None
