"""The files of the landing zone that the platform does not read, each with why: nothing is skipped silently
(docs/internals/ingest.md, "Landing files")."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

from logistics_platform.lib.bronze import landing
from logistics_platform.lib.bronze.schema import spec_of

_SIDECAR_RE = re.compile(r"\+\d+\+\d{10,}\.(keys|headers)\.(avro|json|json\.gz|bin|parquet)$")


def why_unread(relpath: str, topics: set[str]) -> str | None:
    """Why the file at ``relpath`` (from the landing root) is not read; None for a landing file of one of ``topics``."""
    parts = relpath.split("/")
    if side := _SIDECAR_RE.search(parts[-1]):
        return f"the sink's record {side[1]} file (store.kafka.{side[1]}): not part of the contract, not read"
    if len(parts) != 5 or parts[0] != landing.TOPICS_DIR:
        return "not in a topics/<topic>/dt=YYYY-MM-DD/hr=HH folder"
    if parts[1] not in topics:
        return f"not a topic name, or its table {spec_of(parts[1]).identifier} is another topic's (sources.md §8)"
    try:
        landing.parse_landing_path(relpath)
    except landing.LandingPathError as e:  # its message without the path it starts with
        return str(e).split(": ", 1)[-1]
    return None


def unread_files(landing_dir: Path, under: str = "") -> dict[str, str]:
    """Relative path -> why it is not read, for every file under the landing root (or its folder ``under``) that the
    ingest does not read."""
    root = Path(landing_dir)
    topics = {spec.topic for spec in landing.topic_specs(root).values()}
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root / under):  # nothing when it is not a folder
        dirs[:] = sorted(d for d in dirs if not d.startswith(landing.TEMPORARY))
        for name in sorted(files):
            if folder == str(root) and name.startswith(landing.TEMPORARY):
                continue  # the landing root's own notes (the generator's _generation.json), not landed data
            rel = Path(folder, name).relative_to(root).as_posix()
            if (why := why_unread(rel, topics)) is not None:
                out[rel] = why
    return out


def unread_in_hour(landing_dir: Path, topic: str, arrival_hour: datetime) -> dict[str, str]:
    """:func:`unread_files` of one topic's arrival-hour folder."""
    return unread_files(landing_dir, landing.hour_dir(topic, arrival_hour))
