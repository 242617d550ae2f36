"""The files of the landing zone that the platform does not read, each with why: nothing is skipped silently
(docs/internals/ingest.md, "Landing files")."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

from logistics_platform.lib.bronze.landing import TOPICS_DIR, LandingPathError, hour_dir, parse_landing_path
from logistics_platform.lib.bronze.schema import TOPIC_BY_NAME

_TEMPORARY = (".", "_", "+")
_SIDECAR_RE = re.compile(r"\+\d+\+\d{10,}\.(keys|headers)\.(avro|json|json\.gz|bin|parquet)$")


def why_unread(relpath: str) -> str | None:
    """Why the file at ``relpath`` (relative to the landing root) is not read; None when it is a landing file."""
    parts = relpath.split("/")
    name = parts[-1]
    side = _SIDECAR_RE.search(name)
    if side:
        return f"the sink's record {side[1]} file (store.kafka.{side[1]}): not part of the contract, not read"
    if len(parts) != 5 or parts[0] != TOPICS_DIR:
        return "not in a topics/<topic>/dt=YYYY-MM-DD/hr=HH folder"
    if parts[1] not in TOPIC_BY_NAME:
        return f"topic {parts[1]!r} is not in the source contract"
    try:
        parse_landing_path(relpath)
    except LandingPathError as e:
        text = str(e)
        return text.split(": ", 1)[1] if ": " in text else text
    return None


def unread_files(landing_dir: Path, under: str = "") -> dict[str, str]:
    """Relative path -> why it is not read, for every file under the landing root (or its folder ``under``) that the
    ingest does not read."""
    root = Path(landing_dir)
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root / under):  # nothing when it is not a folder
        dirs[:] = sorted(d for d in dirs if not d.startswith(_TEMPORARY))
        for name in sorted(files):
            if folder == str(root) and name.startswith(_TEMPORARY):
                continue  # the landing root's own notes (the generator's _generation.json), not landed data
            rel = Path(folder, name).relative_to(root).as_posix()
            why = why_unread(rel)
            if why is not None:
                out[rel] = why
    return out


def unread_in_hour(landing_dir: Path, topic: str, arrival_hour: datetime) -> dict[str, str]:
    """:func:`unread_files` of one topic's arrival-hour folder."""
    return unread_files(landing_dir, hour_dir(topic, arrival_hour))
