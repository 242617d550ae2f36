"""Discovery and reading of Kafka Connect landing files, ``topics/<topic>/dt=YYYY-MM-DD/hr=HH/<file>`` (the layout:
docs/contract/sources.md; damaged files: docs/internals/ingest.md, "Landing files")."""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import json
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import IO, NamedTuple, cast

from logistics_platform.lib.bronze.avro_container import count_records
from logistics_platform.lib.bronze.schema import TOPICS, TopicSpec, spec_of
from logistics_platform.lib.timekeys import hour_start

TOPICS_DIR = "topics"
_FILE_RE = re.compile(
    r"^(?P<topic>[A-Za-z0-9._-]+)\+(?P<partition>\d+)\+(?P<offset>\d{10,})\.(?:json(?P<gz>\.gz)?|(?P<avro>avro))$"
)
TEMPORARY = (".", "_", "+")  # names of a sink's uploads in flight (and of the landing root's own notes)
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

    @property
    def avro(self) -> bool:
        """An Avro object container file (records, not lines: :mod:`~logistics_platform.lib.bronze.avro`)."""
        return self.relpath.endswith(".avro")

    def open(self) -> IO[bytes]:
        """Binary stream of the file's content, decompressed when gzipped (raw: no BOM handling, no salvage)."""
        return cast(IO[bytes], gzip.open(self.path, "rb")) if self.gzipped else open(self.path, "rb")


class LandingPathError(ValueError):
    """A path does not follow the Kafka Connect landing layout."""


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
        raise LandingPathError(
            f"{relpath!r}: file name must be <topic>+<partition>+<10-digit offset>.json, .json.gz or .avro"
        )
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


def topic_specs(landing_dir: Path) -> dict[str, TopicSpec]:
    """Table -> spec of each topic read: the contract's, then every other topic folder's unless its table is taken."""
    specs, root = dict(TOPICS), Path(landing_dir) / TOPICS_DIR
    for name in sorted(os.listdir(root)) if root.is_dir() else ():
        if not name.startswith(TEMPORARY) and (root / name).is_dir():  # (not a topic name: no file of it is read)
            specs.setdefault(spec_of(name).table, spec_of(name))
    return specs


def list_hour_files(landing_dir: Path, topic: str, arrival_hour: datetime) -> list[LandingFile]:
    """The landing files of one topic and arrival hour, ordered by (partition, start offset)."""
    folder = Path(landing_dir) / hour_dir(topic, arrival_hour)
    if not folder.is_dir():
        return []
    out = []
    for p in folder.iterdir():
        if p.is_file() and _FILE_RE.match(p.name):
            with contextlib.suppress(LandingPathError):
                out.append(landing_file(Path(landing_dir), p))
    return sorted(out, key=lambda f: (f.kafka_partition, f.start_offset, f.relpath))


def list_arrival_hours(landing_dir: Path, topics: Iterable[str] | None = None) -> list[datetime]:
    """Sorted arrival hours that hold at least one landing file (of ``topics``, default all)."""
    wanted = set(topics) if topics is not None else None
    hours: set[datetime] = set()
    for hr_dir in (Path(landing_dir) / TOPICS_DIR).glob("*/dt=*/hr=*"):
        dt_m, hr_m = _DT_RE.match(hr_dir.parent.name), _HR_RE.match(hr_dir.name)
        if not dt_m or not hr_m or int(hr_m[1]) > 23 or not hr_dir.is_dir():
            continue
        if wanted is not None and hr_dir.parent.parent.name not in wanted:
            continue
        if any(p.is_file() and _FILE_RE.match(p.name) for p in hr_dir.iterdir()):
            with contextlib.suppress(ValueError):  # not a date
                hours.add(datetime.strptime(dt_m[1], "%Y-%m-%d") + timedelta(hours=int(hr_m[1])))
    return sorted(hours)


def fingerprint(files: Iterable[LandingFile]) -> str:
    """Deterministic hash of a file set: relative names and sizes, order-independent."""
    return fingerprint_of((f.relpath, f.size) for f in files)


def fingerprint_of(pairs: Iterable[tuple[str, int]]) -> str:
    """:func:`fingerprint` of (relative path, size) pairs (e.g. as recorded in bronze.ingest_log)."""
    return hashlib.sha256("".join(f"{rel}\t{size}\n" for rel, size in sorted(pairs)).encode()).hexdigest()


UTF8_BOM = b"\xef\xbb\xbf"
READ_CHUNK = 1024 * 1024  # bytes read from a plain file, and decompressed bytes produced, per step
GZIP_READ_CHUNK = 64 * 1024  # compressed bytes read per step (small: each step's input is copied while inflating)
# Errors of a remote or network file system that a later attempt can get past: not a property of the file.
TRANSIENT_ERRNOS = frozenset(
    getattr(errno, n)
    for n in ("EAGAIN", "ETIMEDOUT", "ENOTCONN", "ESTALE", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "EINTR")
    if hasattr(errno, n)
)


class CorruptFileError(Exception):
    """A landing file cannot be read to its end; everything before the damage has been delivered."""

    def __init__(self, f: LandingFile, cause: BaseException | str, compressed_at: int | None = None) -> None:
        self.compressed_at = compressed_at  # bytes of the (compressed) file consumed when reading stopped
        name = "zlib.error" if isinstance(cause, zlib.error) else type(cause).__name__
        self.error = cause if isinstance(cause, str) else f"{name}: {cause}"
        super().__init__(f"{f.relpath}: cannot be read to its end ({self.error})")


def is_transient_os_error(exc: OSError) -> bool:
    """Whether an OS error is a storage hiccup (retry) rather than a property of the file (quarantine)."""
    return exc.errno in TRANSIENT_ERRNOS or isinstance(exc, TimeoutError | ConnectionError)


def _unreadable(f: LandingFile, e: OSError, compressed_at: int | None = None) -> CorruptFileError:
    """The error to raise for ``e``: :class:`CorruptFileError`, or ``e`` itself when transient (raised here)."""
    if is_transient_os_error(e):
        raise e
    return CorruptFileError(f, e, compressed_at)


def _open(f: LandingFile) -> IO[bytes]:
    try:
        return open(f.path, "rb")
    except OSError as e:
        raise _unreadable(f, e) from e


def _plain_chunks(f: LandingFile, chunk: int) -> Iterator[bytes]:
    with _open(f) as stream:
        try:
            yield from iter(partial(stream.read, chunk), b"")
        except OSError as e:
            raise _unreadable(f, e) from e


def _gzip_chunks(f: LandingFile, chunk: int) -> Iterator[bytes]:
    """Decompressed content of a gzip file (members in sequence, zero padding after a member allowed); unlike
    :mod:`gzip`, every byte decoded before a damaged or missing part is delivered before :class:`CorruptFileError`."""
    consumed = 0
    d: zlib._Decompress | None = None
    started = False
    with _open(f) as stream:
        while True:
            try:
                data = stream.read(GZIP_READ_CHUNK)
            except OSError as e:
                raise _unreadable(f, e, consumed) from e
            if not data:
                break
            buf = data
            while buf:
                if d is None:
                    if started:
                        buf = buf.lstrip(b"\x00")  # padding after a member, as gzip accepts
                        if not buf:
                            break
                    d, started = zlib.decompressobj(wbits=31), True
                before = d.copy()
                try:
                    out = d.decompress(buf, chunk)
                except zlib.error as e:
                    good, at = _salvage(before, buf)
                    if good:
                        yield good
                    raise CorruptFileError(f, e, consumed + at) from e
                if out:
                    yield out
                # What is left: after the end of a member (the next one, or padding), else held back by the bound.
                rest = d.unused_data if d.eof else d.unconsumed_tail
                consumed += len(buf) - len(rest)
                buf, d = rest, (None if d.eof else d)
        if d is not None:
            while not d.eof:  # drain output held back by the max_length bound (the trailer is checked here too)
                try:
                    out = d.decompress(d.unconsumed_tail, chunk)
                except zlib.error as e:
                    raise CorruptFileError(f, e, consumed) from e
                if not out:
                    break
                yield out
            if not d.eof:
                raise CorruptFileError(
                    f, "compressed data ends before the end-of-stream marker: the file is truncated", consumed
                )


def _salvage(d: zlib._Decompress, buf: bytes) -> tuple[bytes, int]:
    """Output of ``buf`` fed a byte at a time up to the byte that fails (its step holds no decoded data), and the
    compressed bytes consumed."""
    parts: list[bytes] = []
    at = 0
    with contextlib.suppress(zlib.error):
        while at < len(buf):
            parts.append(d.decompress(buf[at : at + 1]))
            at += 1
    return b"".join(parts), at


def iter_content(f: LandingFile, chunk: int = READ_CHUNK) -> Iterator[bytes]:
    """The file's content in chunks, decompressed, without a leading UTF-8 byte-order mark (damage: see above)."""
    chunks = _gzip_chunks(f, chunk) if f.gzipped else _plain_chunks(f, chunk)
    head = b""
    for c in chunks:
        head += c
        if len(head) >= len(UTF8_BOM) or not UTF8_BOM.startswith(head):
            break
    if head.startswith(UTF8_BOM):
        head = head[len(UTF8_BOM) :]
    if head:
        yield head
    yield from chunks


class ContentReader:
    """``read(n)`` over :func:`iter_content`: exactly ``n`` bytes unless the content ends or is damaged (a read that
    meets the damage returns what was readable; the next one raises :class:`CorruptFileError`)."""

    def __init__(self, f: LandingFile, chunk: int = READ_CHUNK) -> None:
        self._chunks = iter_content(f, chunk)
        self._parts: list[bytes] = []
        self._held = 0
        self._error: CorruptFileError | None = None
        self._done = False

    def read(self, n: int) -> bytes:
        if self._error is not None and not self._held:
            raise self._error
        while self._held < n and not self._done:
            try:
                part = next(self._chunks)
            except StopIteration:
                self._done = True
            except CorruptFileError as e:
                self._error, self._done = e, True
                if not self._held:
                    raise
            else:
                self._parts.append(part)
                self._held += len(part)
        data = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        out, rest = (data, b"") if len(data) <= n else (data[:n], data[n:])
        self._parts, self._held = ([rest] if rest else []), len(rest)
        return out


def is_tombstone_line(raw: bytes) -> bool:
    """Whether a line is a Kafka tombstone: ``null``, or a schema/payload envelope whose payload is null (a check
    independent of the envelope parser: the accounting counts tombstones with it)."""
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


class FileCount(NamedTuple):
    """Lines and tombstones of one file; for a damaged file, of its complete lines before the damage."""

    lines: int
    tombstones: int
    corrupt: str | None = None  # why the file cannot be read to its end


# Lines that may be tombstones (confirmed one by one with is_tombstone_line): the count goes block by block.
_BARE_NULL = re.compile(rb"\n[ \t\r]*null[ \t\r]*(?=\n)")  # on the block between newlines: faster than ^...$
_NULL_PAYLOAD = re.compile(rb'"payload"[ \t\r]*:[ \t\r]*null')


def _tombstones(block: bytes) -> int:
    """Tombstone lines among the complete lines of ``block`` (the text between newlines, a final line included)."""
    n, seen = len(_BARE_NULL.findall(b"\n%b\n" % block)), -1
    for m in _NULL_PAYLOAD.finditer(block):
        start = block.rfind(b"\n", 0, m.start()) + 1
        if start != seen:  # a line is looked at once, however many matches it holds
            seen, end = start, block.find(b"\n", m.end())
            n += is_tombstone_line(block[start : end if end >= 0 else len(block)])
    return n


def scan_file(f: LandingFile) -> FileCount:
    """One file's lines and tombstones from its bytes, a block at a time (an Avro container's records, from its
    blocks' framing)."""
    if f.avro:
        try:
            records, error = count_records(f.path)
        except OSError as e:
            return FileCount(0, 0, _unreadable(f, e).error)
        return FileCount(records, 0, error)
    lines = tombstones = 0
    pending: list[bytes] = []  # the line in progress (pieces of it, when longer than a block)
    try:
        for chunk in iter_content(f):
            if b"\n" not in chunk:
                pending.append(chunk)
                continue
            block = b"".join([*pending, chunk])
            cut = block.rfind(b"\n")
            lines += block.count(b"\n")
            tombstones += _tombstones(block[:cut])
            pending = [block[cut + 1 :]]
    except CorruptFileError as e:
        return FileCount(lines, tombstones, e.error)
    tail = b"".join(pending)
    if tail:
        lines += 1
        tombstones += _tombstones(tail)
    return FileCount(lines, tombstones)
