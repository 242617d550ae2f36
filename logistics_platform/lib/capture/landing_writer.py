"""Durable landing of captured changes, the capture position recorded atomically next to the data (docs/capture.md)."""

from __future__ import annotations

import fcntl
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from logistics_platform.lib.bronze.landing import hour_dir
from logistics_platform.lib.timekeys import hour_start

CAPTURE_DIR = "_capture"
PARTITION = 0  # one Kafka partition per topic: the whole change order of a table in one offset sequence


class CaptureLockedError(RuntimeError):
    """Another capture holds the manifest."""


@dataclass
class Manifest:
    """The position of one capture stream (a slot, or a query-mode poller) and what it landed."""

    name: str
    lsn: int = 0  # logical mode: the end LSN of the last durable transaction; 0 before the first batch
    commit_ms: int | None = None  # commit time of that transaction
    offsets: dict[str, int] = field(default_factory=dict)  # topic -> next Kafka offset
    # (temp file, final file) to roll forward, both relative to the landing root
    pending: list[tuple[str, str]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)  # mode-specific (query mode: watermarks, seen versions)
    files: int = 0
    lines: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        d = json.loads(text)
        d["pending"] = [tuple(p) for p in d.get("pending", [])]
        return cls(**d)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durable(path: Path, data: bytes) -> None:
    """Write ``data`` to a new file and fsync it (the caller fsyncs the directory)."""
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def replace_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` all-or-nothing, durably."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    write_durable(tmp, data)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def manifest_path(landing_dir: Path, name: str) -> Path:
    return Path(landing_dir) / CAPTURE_DIR / f"{name}.json"


def read_manifest(landing_dir: Path, name: str) -> Manifest | None:
    """The manifest of capture stream ``name``, or None when it never landed anything."""
    path = manifest_path(landing_dir, name)
    return Manifest.from_json(path.read_text()) if path.exists() else None


def landing_relpath(topic: str, arrival_hour: datetime, start_offset: int) -> str:
    """``topics/<topic>/dt=/hr=/<topic>+0+<offset:010d>.json``: the Kafka Connect sink's name of the file."""
    return f"{hour_dir(topic, arrival_hour)}/{topic}+{PARTITION}+{start_offset:010d}.json"


class LandingWriter:
    """Lands batches for one capture stream; hold it open (it locks the manifest) for the whole capture."""

    def __init__(self, landing_dir: Path, name: str) -> None:
        self.landing_dir = Path(landing_dir)
        self.name = name
        self.dir = self.landing_dir / CAPTURE_DIR
        self.tmp_dir = self.dir / "tmp"
        self.path = manifest_path(self.landing_dir, name)
        self._lock: IO[bytes] | None = None
        self.manifest = Manifest(name)

    def open(self) -> LandingWriter:
        """Lock the stream, load its manifest and finish the renames a crash left half done."""
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        lock = open(self.dir / f"{self.name}.lock", "ab")  # noqa: SIM115  # held until __exit__
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise CaptureLockedError(
                f"capture {self.name!r} is already running (lock {self.dir / self.name}.lock); wait for it to finish"
            ) from None
        self._lock = lock
        found = read_manifest(self.landing_dir, self.name)
        if found is not None:
            self.manifest = found
            self._roll_forward(found.pending)
        # Temp files no manifest lists are batches that crashed before step 2: their changes are read again.
        listed = {Path(tmp).name for tmp, _rel in self.manifest.pending}
        for orphan in self.tmp_dir.glob("*.json"):
            if orphan.name not in listed:
                orphan.unlink()
        return self

    def __enter__(self) -> LandingWriter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:  # closing the lock file releases the lock
            self._lock.close()
            self._lock = None

    def _roll_forward(self, pending: list[tuple[str, str]]) -> None:
        folders = set()
        for tmp, rel in pending:
            src, dst = self.landing_dir / tmp, self.landing_dir / rel
            if src.exists() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
                folders.add(dst.parent)
        for folder in folders:
            fsync_dir(folder)

    def commit(
        self,
        lines_by_topic: Mapping[str, list[str]],
        arrival: datetime,
        *,
        lsn: int | None = None,
        commit_ms: int | None = None,
        state: dict[str, Any] | None = None,
    ) -> list[str]:
        """Land one batch (one file per topic with lines) and record the new position; the relpaths landed."""
        m = self.manifest
        offsets = dict(m.offsets)
        pending: list[tuple[str, str]] = []
        hour = hour_start(arrival)
        n_lines = 0
        for topic in sorted(lines_by_topic):
            lines = lines_by_topic[topic]
            if not lines:
                continue
            start = offsets.get(topic, 0)
            tmp = self.tmp_dir / f"{uuid.uuid4().hex}.json"
            write_durable(tmp, ("\n".join(lines) + "\n").encode("utf-8"))
            pending.append((tmp.relative_to(self.landing_dir).as_posix(), landing_relpath(topic, hour, start)))
            offsets[topic] = start + len(lines)
            n_lines += len(lines)
        if pending:
            fsync_dir(self.tmp_dir)
        new = replace(
            m,
            lsn=m.lsn if lsn is None else lsn,
            commit_ms=m.commit_ms if commit_ms is None else commit_ms,
            offsets=offsets,
            pending=pending,
            state=m.state if state is None else state,
            files=m.files + len(pending),
            lines=m.lines + n_lines,
        )
        replace_atomic(self.path, new.to_json().encode("utf-8"))
        self.manifest = new
        self._roll_forward(pending)
        return [rel for _, rel in pending]
