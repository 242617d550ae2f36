"""The framing of Avro object container files (the Confluent S3 sink's ``AvroFormat``), read without decoding records.

A container is a header (magic ``Obj\\x01``, a metadata map with ``avro.schema`` and ``avro.codec``, a 16-byte sync
marker), then blocks: record count (long), data size (long), the data (compressed by the codec), the sync marker.
:func:`read_header` gives the writer schema and codec; :func:`walk_blocks` the blocks up to the first damage, each
checked by its framing, its sync marker and (deflate) its decompression. The accounting counts a file's records
with it, independently of the DuckDB reader of the ingest; the ingest uses it to find what is readable in front of
a damaged spot.
"""

from __future__ import annotations

import json
import tempfile
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
CODECS = ("null", "deflate", "snappy")  # what DuckDB's read_avro reads (bzip2, xz and zstandard: not landed)
_MAX_VARINT = 10


class AvroFormatError(ValueError):
    """The bytes are not an Avro container as far as read (``at``: the byte offset where it went wrong)."""

    def __init__(self, message: str, at: int) -> None:
        self.at = at
        super().__init__(f"{message} (at byte {at})")


@dataclass(frozen=True)
class Header:
    """A container's header: the writer schema (parsed JSON), its codec, its sync marker and its size in bytes."""

    schema: dict[str, Any]
    codec: str
    sync: bytes
    size: int


@dataclass(frozen=True)
class Block:
    """One block: where it starts and ends in the file, and how many records it holds."""

    start: int
    end: int
    records: int


@dataclass
class Walk:
    """The blocks of a container up to the first damage; ``error`` says what the damage is (None: read to its end)."""

    header: Header | None
    blocks: list[Block] = field(default_factory=list)
    error: str | None = None
    error_at: int | None = None  # byte offset of the damage

    @property
    def records(self) -> int:
        return sum(b.records for b in self.blocks)


def _long(data: bytes | memoryview, at: int) -> tuple[int, int]:
    """An Avro ``long`` (zigzag varint) at ``at``: (value, offset after it)."""
    shift = result = 0
    for i in range(_MAX_VARINT):
        if at + i >= len(data):
            raise AvroFormatError("the file ends inside a number", at + i)
        b = data[at + i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), at + i + 1
        shift += 7
    raise AvroFormatError("a number longer than 10 bytes", at)


def _bytes(data: bytes | memoryview, at: int) -> tuple[bytes, int]:
    n, at = _long(data, at)
    if n < 0 or at + n > len(data):
        raise AvroFormatError("a string runs past the end of the file", at)
    return bytes(data[at : at + n]), at + n


def parse_header(data: bytes | memoryview) -> Header:
    """The header at the start of ``data`` (raises :class:`AvroFormatError` when it is not one)."""
    if bytes(data[:4]) != MAGIC:
        raise AvroFormatError("not an Avro object container file (no Obj\\x01 magic)", 0)
    at = 4
    meta: dict[str, bytes] = {}
    while True:
        count, at = _long(data, at)
        if count == 0:
            break
        if count < 0:  # a negative count is followed by the block's size in bytes
            count = -count
            _, at = _long(data, at)
        for _ in range(count):
            key, at = _bytes(data, at)
            value, at = _bytes(data, at)
            meta[key.decode("utf-8", "replace")] = value
    if at + SYNC_SIZE > len(data):
        raise AvroFormatError("the file ends inside its header", at)
    sync = bytes(data[at : at + SYNC_SIZE])
    codec = meta.get("avro.codec", b"null").decode("utf-8", "replace")
    if "avro.schema" not in meta:
        raise AvroFormatError("the header holds no avro.schema", at)
    try:
        schema = json.loads(meta["avro.schema"])
    except ValueError as e:
        raise AvroFormatError(f"the header's avro.schema is not JSON: {e}", at) from None
    return Header(schema if isinstance(schema, dict) else {"type": schema}, codec, sync, at + SYNC_SIZE)


def read_header(path: Path) -> Header:
    """The header of a container file (raises :class:`AvroFormatError`, or OSError when unreadable)."""
    with open(path, "rb") as f:
        head = f.read(64 * 1024)
        while True:
            try:
                return parse_header(head)
            except AvroFormatError as e:
                more = f.read(len(head))  # a header larger than read so far: read on
                if not more or e.at < len(head) - 32:
                    raise
                head += more


def _check_data(codec: str, data: bytes) -> str | None:
    """Why a block's data does not decompress (None: it does, or the codec is not checked here)."""
    if codec == "deflate":
        d = zlib.decompressobj(-15)
        try:
            d.decompress(data)
            d.flush()
        except zlib.error as e:
            return f"the block's deflate data is damaged: {e}"
        if not d.eof:
            return "the block's deflate data ends before its end-of-stream marker"
    return None


def walk_bytes(data: bytes, check_data: bool = True) -> Walk:
    """:func:`walk_blocks` of a container held in memory."""
    try:
        header = parse_header(data)
    except AvroFormatError as e:
        return Walk(None, error=str(e), error_at=e.at)
    walk = Walk(header)
    if header.codec not in CODECS:
        walk.error, walk.error_at = f"codec {header.codec!r} is not one of {', '.join(CODECS)}", 0
        return walk
    at = header.size
    view = memoryview(data)
    while at < len(data):
        start = at
        try:
            records, at = _long(view, at)
            size, at = _long(view, at)
        except AvroFormatError as e:
            walk.error, walk.error_at = f"block header cut short: {e}", start
            return walk
        if records < 0 or size < 0:
            walk.error, walk.error_at = f"block header holds a negative count ({records} records, {size} bytes)", start
            return walk
        if at + size + SYNC_SIZE > len(data):
            walk.error = f"the file ends inside a block ({size:,} bytes of data announced): the file is truncated"
            walk.error_at = start
            return walk
        if bytes(view[at + size : at + size + SYNC_SIZE]) != header.sync:
            walk.error, walk.error_at = "a block does not end with the file's sync marker", start
            return walk
        why = _check_data(header.codec, data[at : at + size]) if check_data else None
        if why is not None:
            walk.error, walk.error_at = why, start
            return walk
        at += size + SYNC_SIZE
        walk.blocks.append(Block(start, at, records))
    return walk


def walk_blocks(path: Path, check_data: bool = True) -> Walk:
    """The blocks of a container file up to the first damage (framing, sync marker, deflate data checked)."""
    return walk_bytes(path.read_bytes(), check_data)


# -- what DuckDB's read_avro decodes ----------------------------------------------------------------------------
# read_avro does not fail on a damaged container: it stops early or skips blocks without a word (checked with
# truncated files and flipped bytes, codecs null, deflate and snappy). So nothing it returns is taken on trust: its
# record count must be the one the blocks' framing announces, else the blocks are decoded one by one to find the
# first one it does not read whole, and only the blocks in front of it count.

_LOCAL = threading.local()


def duck() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB connection with the avro extension (read_avro), opened once."""
    con = getattr(_LOCAL, "con", None)
    if con is None:
        from logistics_platform.lib.connections import connect

        con = _LOCAL.con = connect()
        con.execute("set threads = 1")  # one file at a time; the ingest's parallelism is per hour and per process
    return con


def _container(data: bytes, header: Header, blocks: list[Block]) -> bytes:
    return data[: header.size] + b"".join(data[b.start : b.end] for b in blocks)


def _query(path: Path | str, select: str) -> pa.Table:
    # hive_partitioning off: read_avro would add the dt=/hr= folders of the landing layout as columns.
    sql = f"select {select} from read_avro(?, hive_partitioning = false)"
    return duck().execute(sql, [str(path)]).to_arrow_table()


@dataclass
class Decoded:
    """What of a container DuckDB decodes: ``table`` (its records in file order, those of ``walk.blocks``)."""

    walk: Walk
    table: pa.Table | None = None


def _read_prefix(data: bytes, walk: Walk, select: str) -> pa.Table | None:
    assert walk.header is not None
    with tempfile.NamedTemporaryFile(suffix=".avro") as tmp:
        tmp.write(_container(data, walk.header, walk.blocks))
        tmp.flush()
        try:
            return _query(tmp.name, select)
        except duckdb.Error:
            return None


def _count(data: bytes, header: Header, block: Block) -> int | None:
    with tempfile.NamedTemporaryFile(suffix=".avro") as tmp:
        tmp.write(_container(data, header, [block]))
        tmp.flush()
        try:
            return int(_query(tmp.name, "count(*) as n").column(0)[0].as_py())
        except duckdb.Error:
            return None


def decode(path: Path, select: str = "*") -> Decoded:
    """The records of ``path`` that are readable in front of any damage, as DuckDB decodes them (``select``: the
    projection over ``read_avro``), with the walk that says where the damage is."""
    data = path.read_bytes()
    walk = walk_bytes(data)
    if walk.header is None or not walk.blocks:
        return Decoded(walk, None)
    if walk.error is None:
        try:
            table: pa.Table | None = _query(path, select)
        except duckdb.Error:
            table = None
    else:
        table = _read_prefix(data, walk, select)
    if table is not None and table.num_rows == walk.records:
        return Decoded(walk, table)
    # DuckDB read less than the framing announces (or failed): find the first block it does not read whole.
    for i, block in enumerate(walk.blocks):
        n = _count(data, walk.header, block)
        if n != block.records:
            got = "fails" if n is None else f"gives {n:,} of its {block.records:,} records"
            walk.error = f"block {i} (bytes {block.start:,}..{block.end:,}) does not decode: read_avro {got}"
            walk.error_at = block.start
            walk.blocks = walk.blocks[:i]
            break
    if not walk.blocks:
        return Decoded(walk, None)
    return Decoded(walk, _read_prefix(data, walk, select))


def count_records(path: Path) -> tuple[int, str | None]:
    """(records readable in front of any damage, why the file cannot be read to its end or None), for accounting."""
    data = path.read_bytes()
    walk = walk_bytes(data)
    if walk.header is None or not walk.blocks:
        return 0, walk.error
    if _count_all(path, data, walk) == walk.records:
        return walk.records, walk.error
    decoded = decode(path, "1 as one")
    return decoded.walk.records, decoded.walk.error


def _count_all(path: Path, data: bytes, walk: Walk) -> int | None:
    if walk.error is None:
        try:
            return int(_query(path, "count(*) as n").column(0)[0].as_py())
        except duckdb.Error:
            return None
    t = _read_prefix(data, walk, "count(*) as n")
    return None if t is None else int(t.column(0)[0].as_py())
