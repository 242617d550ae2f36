"""Avro object container files (the Confluent S3 sink's ``AvroFormat``): their blocks walked by fastavro's
``block_reader`` (framing, sync marker and decompression checked) and their records decoded by DuckDB's
``read_avro``, trusted only as far as the walk's record count (docs/internals/parsers.md).
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import duckdb
import fastavro
import pyarrow as pa

CODECS = ("null", "deflate", "snappy")  # what DuckDB's read_avro reads (bzip2, xz and zstandard: not landed)
# fastavro's errors on damaged bytes (ValueError, EOFError, KeyError, zlib.error, ...) share no narrower base class.
_DAMAGE = Exception


@dataclass(frozen=True)
class Header:
    """A container's header: the writer schema (parsed JSON), its codec and its size in bytes."""

    schema: dict[str, Any]
    codec: str
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


def walk_bytes(data: bytes) -> Walk:
    """The blocks of a container's bytes up to the first damage (framing, sync marker, decompression checked)."""
    fo = BytesIO(data)
    try:
        reader = fastavro.block_reader(fo)
        schema = json.loads(reader.metadata["avro.schema"])
    except _DAMAGE as e:
        return Walk(None, error=f"not an Avro container file with a schema ({type(e).__name__}: {e})", error_at=0)
    header = Header(schema if isinstance(schema, dict) else {"type": schema}, reader.codec, fo.tell())
    if header.codec not in CODECS:
        return Walk(header, error=f"codec {header.codec!r} is not one of {', '.join(CODECS)}", error_at=0)
    walk = Walk(header)
    at = header.size
    try:
        for b in reader:
            if b.num_records < 0:
                walk.error, walk.error_at = f"block header holds a negative count ({b.num_records} records)", at
                return walk
            at = b.offset + b.size
            walk.blocks.append(Block(b.offset, at, b.num_records))
    except EOFError:
        walk.error, walk.error_at = "the file ends inside a block: the file is truncated", at
    except _DAMAGE as e:  # a wrong sync marker, data that does not decompress
        walk.error, walk.error_at = f"block at byte {at:,} is damaged ({type(e).__name__}: {e})", at
    else:
        if at != len(data):  # fastavro ends quietly on a block header cut short
            walk.error, walk.error_at = "the file ends inside a block header: the file is truncated", at
    return walk


# -- what DuckDB's read_avro decodes: it stops early or skips damaged blocks without a word, so its record count must
# be the framing's, else the first block it does not read whole is found and only the blocks in front of it count.

_LOCAL = threading.local()


def duck() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB connection with the avro extension (read_avro), opened once."""
    con = getattr(_LOCAL, "con", None)
    if con is None:
        from logistics_platform.lib.connections import connect

        con = _LOCAL.con = connect()
        con.execute("set threads = 1")  # one file at a time; the ingest's parallelism is per hour and per process
    return con


def _try(path: Path | str, select: str) -> pa.Table | None:
    # hive_partitioning off: read_avro would add the dt=/hr= folders of the landing layout as columns.
    sql = f"select {select} from read_avro(?, hive_partitioning = false)"
    try:
        return duck().execute(sql, [str(path)]).to_arrow_table()
    except duckdb.Error:
        return None


def _read(path: Path, data: bytes, walk: Walk, select: str, blocks: list[Block] | None = None) -> pa.Table | None:
    """read_avro of the file, or (damage, or ``blocks`` given) of its header and those blocks; None if DuckDB fails."""
    if blocks is None and walk.error is None:
        return _try(path, select)
    assert walk.header is not None
    with tempfile.NamedTemporaryFile(suffix=".avro") as tmp:
        tmp.write(data[: walk.header.size] + b"".join(data[b.start : b.end] for b in blocks or walk.blocks))
        tmp.flush()
        return _try(tmp.name, select)


@dataclass
class Decoded:
    """What of a container DuckDB decodes: ``table`` (its records in file order, those of ``walk.blocks``)."""

    walk: Walk
    table: pa.Table | None = None
    select: str = "*"


def decode(path: Path, select: str | Callable[[Header], str] = "*") -> Decoded:
    """The records of ``path`` readable in front of any damage (``select`` over ``read_avro``, or made from the
    header), and the walk."""
    data = path.read_bytes()
    walk = walk_bytes(data)
    if walk.header is None or not walk.blocks:
        return Decoded(walk, None)
    select = select(walk.header) if callable(select) else select
    table = _read(path, data, walk, select)
    if table is not None and table.num_rows == walk.records:
        return Decoded(walk, table, select)
    # DuckDB read less than the framing announces (or failed): find the first block it does not read whole.
    for i, block in enumerate(walk.blocks):
        counted = _read(path, data, walk, "count(*) as n", [block])
        n = None if counted is None else counted.column(0)[0].as_py()
        if n != block.records:
            got = "fails" if n is None else f"gives {n:,} of its {block.records:,} records"
            walk.error = f"block {i} (bytes {block.start:,}..{block.end:,}) does not decode: read_avro {got}"
            walk.error_at = block.start
            walk.blocks = walk.blocks[:i]
            break
    return Decoded(walk, _read(path, data, walk, select) if walk.blocks else None, select)


def count_records(path: Path) -> tuple[int, str | None]:
    """(records readable in front of any damage, why the file cannot be read to its end or None)."""
    walk = decode(path, "1 as one").walk
    return walk.records, walk.error
