"""The layout of the landing zone: lines waiting per arrival hour and partition, written hour by hour as Kafka Connect
names its files (some CDC topic-partition-hours as Avro: docs/internals/generator.md)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from operator import itemgetter
from pathlib import Path
from random import Random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from logistics_platform.generator import avro as A
from logistics_platform.generator import encode as E
from logistics_platform.generator.config import TABLES, GeneratorConfig
from logistics_platform.generator.model import HOUR_US, SECOND, T_PINGS, TOPICS, Period, Piece, Record
from logistics_platform.generator.summary import FILES, LATE, LINES, TOMBSTONES, TopicStats
from logistics_platform.generator.writer import FileWriter, PingText, cdc_file
from logistics_platform.lib.timekeys import from_epoch_micros


@dataclass
class Layout:
    """Where every line lands: arrival hour, partition, file and offset; writes each arrival hour once complete."""

    out: Path
    cfg: GeneratorConfig
    period: Period
    rng: Random
    stats: list[TopicStats]
    writer: FileWriter
    delayed_plan: set[tuple[int, int]]

    def __post_init__(self) -> None:
        self._nparts = [self.cfg.partitions[t] for t in TABLES]
        self._cdc: list[dict[int, list[list[Record]]]] = [{} for _ in TABLES[:T_PINGS]]
        # per CDC topic and arrival hour: which partitions land as Avro files (drawn when the hour is first used)
        self._avro: list[dict[int, list[bool]]] = [{} for _ in TABLES[:T_PINGS]]
        self._avro_rate = self.cfg.avro_file_rate
        # per CDC topic and partition: the added columns of the sink's current Avro writer schema
        self._avro_schema: list[list[tuple[str, ...]]] = [[()] * n for n in self._nparts[:T_PINGS]]
        self._pings: dict[int, list[pa.Table]] = {}
        self._ping_extras: dict[int, list[tuple[int, int, str]]] = {}  # corrupted ping lines per arrival hour
        self._flushed = -1  # last arrival hour written
        self._next_offset = [[0] * n for n in self._nparts]
        self._max_lsn: list[dict[Any, int]] = [{} for _ in TABLES[:T_PINGS]]
        self.files: list[dict[str, Any]] = []  # one {"topic", "gz", "bytes"} per file, for the summary
        self.delayed: list[dict[str, Any]] = []  # the files uploaded late, as the summary lists them
        self.lines_written = 0

    def _bucket(self, ti: int, a: int) -> list[list[Record]]:
        """The per-partition records of topic ``ti`` waiting for arrival hour ``a``; refuses an hour already written."""
        bucket = self._cdc[ti].get(a)
        if bucket is None:
            if a <= self._flushed:
                raise RuntimeError(f"generator bug: a line for arrival hour {a} after that hour was written")
            bucket = self._cdc[ti][a] = [[] for _ in range(self._nparts[ti])]
            self._avro[ti][a] = [self._lands_avro(ti, a, p) for p in range(self._nparts[ti])]
        return bucket

    def _lands_avro(self, ti: int, a: int, p: int) -> bool:
        """Whether partition ``p`` of topic ``ti`` lands as Avro files in arrival hour ``a`` (a hash, not a draw)."""
        digest = hashlib.blake2b(f"{self.cfg.seed}:avro:{ti}:{a}:{p}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64 < self._avro_rate

    def add(self, ti: int, arrival: int, line: str, key: Any, lsn: int, nlines: int, event_us: int) -> bool:
        """File one CDC line of row ``key`` (or its delete + tombstone, ``nlines`` 2) in its arrival hour and the key's
        partition, counted late when ``event_us`` is more than L before that hour; returns whether it lands as Avro."""
        period, nparts = self.period, self._nparts[ti]
        a = (arrival - period.start_us) // HOUR_US
        # E.partition_of with its integer case first: this runs for every change
        part = key % nparts if type(key) is int else E.partition_of(key, nparts)
        bucket = self._cdc[ti].get(a) or self._bucket(ti, a)
        bucket[part].append((arrival, line, key, lsn, nlines))
        avro = self._avro_rate > 0 and self._avro[ti][a][part]
        if event_us < period.start_us + a * HOUR_US - period.late_us:
            self.stats[ti].hour(a)[LATE] += 1
        if nlines == 2 and not avro:
            self.stats[ti].hour(a)[TOMBSTONES] += 1
        return avro

    def add_corrupted(self, ti: int, arrival: int, line: str, key: Any) -> int | None:
        """File a corrupted copy of a CDC line of row ``key`` (without the key: no row, never out of order or late);
        returns its arrival hour, or None when that partition-hour lands as Avro (then it is not filed)."""
        a = (arrival - self.period.start_us) // HOUR_US
        bucket = self._bucket(ti, a)
        part = E.partition_of(key, self._nparts[ti])
        if self._avro[ti][a][part]:
            return None
        bucket[part].append((arrival, line, None, 0, 1))
        return a

    def add_pings(self, rows: pa.Table) -> None:
        """File ping rows (columns arrival, part, t, ...) under their arrival hours and count the late ones."""
        period = self.period
        hours = pc.divide(pc.subtract(rows.column("arrival"), period.start_us), HOUR_US)
        late = pc.less(rows.column("t"), pc.add(pc.multiply(hours, HOUR_US), period.start_us - period.late_us))
        for item in pc.value_counts(pc.filter(hours, late)).to_pylist():
            self.stats[T_PINGS].hour(item["values"])[LATE] += item["counts"]
        distinct = pc.unique(hours).to_pylist()
        for a in sorted(distinct):
            part = rows if len(distinct) == 1 else rows.filter(pc.equal(hours, a))
            if a <= self._flushed:
                raise RuntimeError(f"generator bug: pings for arrival hour {a} after that hour was written")
            self._pings.setdefault(a, []).append(part)

    def add_ping_line(self, arrival: int, part: int, line: str) -> int:
        """File one corrupted ping line (text) for its arrival time; returns its arrival hour."""
        a = (arrival - self.period.start_us) // HOUR_US
        self._ping_extras.setdefault(a, []).append((arrival, part, line))
        return a

    def unwritten(self) -> list[tuple[int, int]]:
        """(topic, arrival hour) pairs still holding lines: empty after the last hour is written."""
        buckets: list[dict[int, Any]] = [*self._cdc, self._pings]
        return [(ti, a) for ti, b in enumerate(buckets) for a in b if b[a]]

    # -------------------------------------------------------------------------------------------------- writing
    def flush(self, a: int) -> None:
        """Write arrival hour ``a``: per topic and partition, in arrival order, ``flush_size`` lines a file."""
        for ti in range(T_PINGS):
            parts = self._cdc[ti].pop(a, [])
            avro_parts = self._avro[ti].pop(a, None)
            if not parts:
                continue
            # each partition's lines in arrival order (a stable sort: equal arrivals keep their routing order)
            for recs in parts:
                recs.sort(key=itemgetter(0))
                self._count_out_of_order(ti, recs)

            def render(
                p: int, i: int, j: int, parts: list[list[Record]] = parts, ti: int = ti, avro: Any = avro_parts
            ) -> list[Piece]:
                if not (avro and avro[p]):
                    return [(*cdc_file(parts[p][i:j]), None)]
                pieces, self._avro_schema[ti][p] = A.avro_pieces(TABLES[ti], parts[p][i:j], self._avro_schema[ti][p])
                return pieces

            self._write_files(ti, a, [len(x) for x in parts], render)
        self._flush_pings(a)
        self._flushed = a

    def _count_out_of_order(self, ti: int, recs: list[Record]) -> None:
        """Lines landing after a line of the same row with a higher LSN (a key always has one partition)."""
        max_lsn = self._max_lsn[ti]
        ooo = 0
        for _, _, k, lsn, _ in recs:
            if k is None:
                continue
            m = max_lsn.get(k)
            if m is None or lsn > m:
                max_lsn[k] = lsn
            elif lsn < m:
                ooo += 1
        self.stats[ti].out_of_order_lines += ooo

    def _flush_pings(self, a: int) -> None:
        """Pings of one arrival hour: rows, then corrupted lines (rows with a ``line``), sorted by (partition,
        arrival); files made later."""
        tables = self._pings.pop(a, [])
        extras = self._ping_extras.pop(a, None)
        if extras:
            arrival, part, lines = zip(*extras, strict=True)
            line = pa.array([x.encode("utf-8", "surrogateescape") + b"\n" for x in lines], pa.binary())
            tables.append(pa.table({"arrival": pa.array(arrival, pa.int64()), "part": pa.array(part), "line": line}))
        if not tables:
            return
        # contiguous: take() on a table of many chunks (one per materialized batch) costs far more per file
        rows = pa.concat_tables(tables, promote_options="default").combine_chunks()
        order = pc.sort_indices(rows, sort_keys=[("part", "ascending"), ("arrival", "ascending")])  # stable
        sorted_arrivals = rows.column("arrival").chunk(0).take(order)
        counts = [0] * self._nparts[T_PINGS]
        for item in pc.value_counts(rows.column("part")).to_pylist():
            counts[item["values"]] = item["counts"]
        starts = [sum(counts[:p]) for p in range(len(counts))]
        text = PingText(rows, order)

        def render(p: int, i: int, j: int) -> list[Piece]:
            lo, hi = starts[p] + i, starts[p] + j
            return [(partial(text.text, lo, hi), j - i, sorted_arrivals[hi - 1].as_py(), None)]

        self._write_files(T_PINGS, a, counts, render)

    def _write_files(self, ti: int, a: int, counts: list[int], render: Callable[[int, int, int], list[Piece]]) -> None:
        """Write each partition's lines in chunks of at most ``flush_size``; ``render(partition, first line, end line)``
        gives a chunk's files (one, or Avro files cut where the writer schema changes: docs/internals/generator.md)."""
        cfg, rng = self.cfg, self.rng
        hour_us = self.period.hour_start(a)
        topic = TOPICS[TABLES[ti]]
        ph = self.stats[ti].hour(a)
        delayed_p = next((p for p, n in enumerate(counts) if n >= 2), None) if (ti, a) in self.delayed_plan else None
        for p, n in enumerate(counts):
            if not n:
                continue
            chunks = list(pairwise([*range(0, n, cfg.flush_size), n]))
            delayed_at = None
            if p == delayed_p:
                # The sink's last flush of this partition uploads hours late into the (old) hour folder.
                i, j = chunks.pop()
                cut = max(1, (j - i) // 4)
                chunks += [(i, j - cut), (j - cut, j)] if j - i >= 2 else [(i, j)]
                delayed_at = len(chunks) - 1
            for ci, (i, j) in enumerate(chunks):
                gz = rng.random() < cfg.gzip_rate
                pieces = render(p, i, j)
                for k, (raw, nlines, last_arrival, schema) in enumerate(pieces):
                    start_offset = self._next_offset[ti][p]
                    self._next_offset[ti][p] = start_offset + nlines
                    written_at = last_arrival // SECOND
                    rel = E.landing_relpath(topic, hour_us, p, start_offset, gz and schema is None)
                    record: dict[str, Any] = {"topic": ti, "gz": gz, "bytes": 0}
                    if schema is not None:  # not gzipped: an Avro file compresses its block (codec deflate)
                        rel = rel.removesuffix(".json") + ".avro"
                        record = {"topic": ti, "gz": False, "avro": "deflate" if gz else "null", "bytes": 0}
                        raw = partial(A.container, schema, raw, record["avro"], A.sync_marker(f"{cfg.seed}:{rel}"))
                    if ci == delayed_at and k == len(pieces) - 1:
                        written_at = (hour_us + cfg.delayed_file_hours * HOUR_US) // SECOND + rng.randrange(3000)
                        self.delayed.append(
                            {
                                "path": rel,
                                "topic": topic,
                                "arrival_hour": from_epoch_micros(hour_us).isoformat(),
                                "appears_at": from_epoch_micros(written_at * SECOND).isoformat(),
                                "lines": nlines,
                            }
                        )
                    self.writer.put(self.out / rel, raw, record["gz"], written_at, record)
                    ph[LINES] += nlines
                    ph[FILES] += 1
                    self.lines_written += nlines
                    self.files.append(record)
