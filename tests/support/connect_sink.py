"""Lands Kafka records as a Kafka Connect object-store sink does (the layout of docs/contract/sources.md).

``topics/<topic>/dt=YYYY-MM-DD/hr=HH/<topic>+<partition>+<start_offset>.<ext>``, with the arrival hour taken from the
clock when the files are written, as a live sink does. A file holds up to ``flush_size`` records of one
topic-partition and is named by the Kafka offset of its first record. Tombstones are skipped
(``behavior.on.null.values=ignore``), so a file's lines need not have consecutive offsets; a later file still
starts past every offset of the one before.

- JSON (``format.class=JsonFormat``): JSON Lines, each line the value exactly as the converter serialised it.
- Avro (``format.class=AvroFormat``): object container files (fastavro), codec null, the writer schema from the
  registry in the header, and a new file whenever the writer schema changes. A record is the converter's payload
  without Confluent's wire prefix (magic byte 0, 4-byte schema id), decoded by that schema and written again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

import fastavro

from logistics_platform.lib.timekeys import hour_start
from tests.support.debezium import Captured, Record

FLUSH_SIZE = 1000  # the sink's flush.size: records per file
_WIRE_PREFIX = 5  # Confluent's magic byte and schema id before the Avro datum


def _hour_dir(landing_dir: Path, topic: str, arrival: datetime) -> Path:
    h = hour_start(arrival)
    return landing_dir / "topics" / topic / f"dt={h:%Y-%m-%d}" / f"hr={h:%H}"


def _file_name(r: Record, ext: str) -> str:
    return f"{r.topic}+{r.partition}+{r.offset:010d}.{ext}"


def _chunks(
    records: Iterable[Record], flush_size: int, same_file: Callable[[Record, Record], bool]
) -> Iterator[list[Record]]:
    """The non-tombstone records cut into files: per topic-partition, at most ``flush_size``, and a new file when
    ``same_file(first, record)`` is false."""
    current: dict[tuple[str, int], list[Record]] = {}
    for r in records:
        if r.value is None:
            continue
        key = (r.topic, r.partition)
        chunk = current.get(key)
        if chunk and (len(chunk) >= flush_size or not same_file(chunk[0], r)):
            yield chunk
            chunk = None
        if chunk is None:
            chunk = current[key] = []
        chunk.append(r)
    yield from (c for c in current.values() if c)


def land_json(
    captured: Captured, landing_dir: Path, arrival: datetime | None = None, flush_size: int = FLUSH_SIZE
) -> list[Path]:
    """Write the records as JSON Lines files into the arrival hour of ``arrival`` (default: now); the paths."""
    when = arrival or datetime.now(UTC)
    paths = []
    for chunk in _chunks(captured.records, flush_size, lambda _a, _b: True):
        folder = _hour_dir(landing_dir, chunk[0].topic, when)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / _file_name(chunk[0], "json")
        path.write_bytes(b"".join(r.value + b"\n" for r in chunk if r.value is not None))
        paths.append(path)
    return paths


def schema_id(r: Record) -> int:
    """The registry id in a record's Confluent wire prefix."""
    assert r.value is not None and r.value[0] == 0, "not a Confluent-serialised value"
    return int.from_bytes(r.value[1:_WIRE_PREFIX], "big")


def avro_record(r: Record, schema: dict[str, Any]) -> dict[str, Any]:
    """A record's value as fastavro reads it: the converter's payload without the wire prefix is its Avro datum."""
    assert r.value is not None
    return fastavro.schemaless_reader(BytesIO(r.value[_WIRE_PREFIX:]), schema)  # type: ignore[return-value]


def sync_marker(name: str) -> bytes:
    """A container's sync marker: it only has to be unlikely inside the data; derived from the file name, files
    are reproducible."""
    return hashlib.blake2b(name.encode(), digest_size=16).digest()


AVRO_CODECS = ("null", "deflate", "snappy")


def avro_container(
    schema: dict[str, Any] | str,
    records: list[dict[str, Any]],
    sync: bytes,
    codec: str = "null",
    block_records: int | None = None,
) -> bytes:
    """An Avro object container file of ``records`` (fastavro; snappy needs cramjam).

    ``codec``: null, deflate or snappy; ``block_records``: records per block (default: all in one block).
    """
    if codec not in AVRO_CODECS:
        raise ValueError(f"codec {codec!r}: expected one of {', '.join(AVRO_CODECS)}")
    out = BytesIO()
    parsed = json.loads(schema) if isinstance(schema, str) else schema
    writer = fastavro.write.Writer(out, parsed, codec=codec, sync_marker=sync, sync_interval=2**62)
    step = block_records or max(1, len(records))
    for i, rec in enumerate(records, 1):
        writer.write(rec)
        if i % step == 0:
            writer.flush()
    writer.flush()
    return out.getvalue()


def land_avro(
    captured: Captured, landing_dir: Path, arrival: datetime | None = None, flush_size: int = FLUSH_SIZE
) -> list[Path]:
    """Write the records as Avro container files into the arrival hour of ``arrival`` (default: now); the paths."""
    when = arrival or datetime.now(UTC)
    paths = []
    for chunk in _chunks(captured.records, flush_size, lambda a, b: schema_id(a) == schema_id(b)):
        folder = _hour_dir(landing_dir, chunk[0].topic, when)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / _file_name(chunk[0], "avro")
        schema = fastavro.parse_schema(json.loads(captured.schemas[schema_id(chunk[0])]))
        records = [avro_record(r, schema) for r in chunk]
        path.write_bytes(avro_container(captured.schemas[schema_id(chunk[0])], records, sync_marker(path.name)))
        paths.append(path)
    return paths


def land(
    captured: Captured, landing_dir: Path, arrival: datetime | None = None, flush_size: int = FLUSH_SIZE
) -> list[Path]:
    """Land ``captured`` in the sink format of its converter (JSON Lines or Avro container files)."""
    if captured.config.converter == "avro":
        return land_avro(captured, landing_dir, arrival, flush_size)
    return land_json(captured, landing_dir, arrival, flush_size)
