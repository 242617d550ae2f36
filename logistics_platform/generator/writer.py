"""The writer: a landed file's text, and the thread that compresses and writes it (docs/internals/generator.md)."""

from __future__ import annotations

import os
import queue
import threading
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from logistics_platform.generator import encode as E
from logistics_platform.generator.model import SECOND, Record


class FileWriter:
    """Compresses and writes landed files on a thread (docs/internals/generator.md), in order, from a bounded queue."""

    def __init__(self, depth: int = 16) -> None:
        self._queue: queue.Queue[tuple[Path, Any, bool, int, dict[str, Any]] | None] = queue.Queue(depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="generator-writer", daemon=True)
        self._thread.start()

    def put(self, path: Path, raw: Any, gz: bool, mtime: int, record: dict[str, Any]) -> None:
        """Queue one file (``raw``: its bytes or a function making them); sets ``record["bytes"]`` when written."""
        if self._error is not None:
            raise RuntimeError(f"generator: writing landed files failed: {self._error}") from self._error
        self._queue.put((path, raw, gz, mtime, record))

    def _loop(self) -> None:
        made: set[Path] = set()
        while (item := self._queue.get()) is not None:
            if self._error is not None:
                continue  # keep draining so that put() never blocks on a dead writer
            path, raw, gz, mtime, record = item
            try:
                raw = raw() if callable(raw) else raw
                # gzip.compress(mtime=0) is exactly this (header without time or name), minus a copy
                data = zlib.compress(raw, 1, 31) if gz else raw
                if path.parent not in made:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    made.add(path.parent)
                path.write_bytes(data)
                os.utime(path, (mtime, mtime))
                record["bytes"] = len(data)
            except BaseException as exc:  # re-raised in the generating thread by put() or close()
                self._error = exc

    def close(self, raise_error: bool = True) -> None:
        """Wait until every queued file is written; re-raise a write error unless already failing."""
        self._queue.put(None)
        self._thread.join()
        if raise_error and self._error is not None:
            raise RuntimeError(f"generator: writing landed files failed: {self._error}") from self._error


def cdc_file(records: list[Record]) -> tuple[bytes, int, int]:
    """A CDC file's content (newline-terminated lines, lone surrogates as their raw bytes), its line count (a
    delete's record is two lines) and its last arrival time."""
    lines = [rec[1] for rec in records]
    lines.append("")  # the final newline, without copying the joined text once more
    raw = "\n".join(lines).encode("utf-8", "surrogateescape")
    return raw, sum([rec[4] for rec in records]), records[-1][0]


class PingText:
    """JSON Lines text of one arrival hour's pings, a file (a slice of ``order``) at a time; a ``line`` kept as is."""

    def __init__(self, rows: pa.Table, order: pa.Array) -> None:
        self.rows, self.order = rows, order
        self.seconds, self.first_hour = pa.array([], pa.string()), 0
        bounds = pc.min_max(rows.column("t")) if "t" in rows.column_names else None
        if bounds is not None and bounds["min"].is_valid:
            first_hour, last_hour = bounds["min"].as_py() // E.HOUR_US, bounds["max"].as_py() // E.HOUR_US
            self.seconds = pa.concat_arrays([E.second_prefixes(h) for h in range(first_hour, last_hour + 1)])
            self.first_hour = first_hour

    def text(self, lo: int, hi: int) -> memoryview:
        """The bytes of positions ``lo`` to ``hi`` of ``order``."""
        rows = self.rows.take(self.order.slice(lo, hi - lo))
        if "t" not in rows.column_names:
            lines = rows.column("line").combine_chunks()
        else:
            lines = ping_text(rows, self.seconds, self.first_hour)
            if "line" in rows.column_names:  # corrupted copies among the rows: their lines as they are
                lines = pc.if_else(pc.is_null(rows.column("line")), lines, rows.column("line")).combine_chunks()
        _, offsets_buf, data_buf = lines.buffers()
        line_bounds = memoryview(offsets_buf).cast("i")
        return memoryview(data_buf)[line_bounds[lines.offset] : line_bounds[lines.offset + len(lines)]]


def ping_text(rows: pa.Table, seconds: pa.Array, first_hour: int) -> pa.Array:
    """JSON Lines text (binary array, newline-terminated) of ping rows, built by Arrow kernels; ``seconds`` holds
    ``YYYY-MM-DDTHH:MM:SS.`` of every second from epoch hour ``first_hour`` on."""
    text = pa.string()
    ts = rows.column("t")
    prefix = seconds.take(pc.subtract(pc.divide(ts, SECOND), first_hour * 3600))
    micros = pc.subtract(ts, pc.multiply(pc.divide(ts, SECOND), SECOND))
    col = rows.column
    # (the JSON text before each value, the value), in the contract's column order
    parts = (
        ('{"ping_id":"', col("pid")),
        ('","courier_id":', pc.cast(col("cid"), text)),
        (',"order_id":', pc.fill_null(pc.cast(col("oid"), text), "null")),
        (',"lat":', pc.cast(pc.round(col("lat"), 6), text)),
        (',"lon":', pc.cast(pc.round(col("lon"), 6), text)),
        (',"speed_kmh":', pc.cast(pc.round(col("speed"), 1), text)),
        (',"recorded_at":"', prefix),
    )
    micros_text = pc.utf8_lpad(pc.cast(micros, text), width=6, padding="0")
    line = pc.binary_join_element_wise(*(x for pair in parts for x in pair), micros_text, 'Z"}\n', "")
    return (line.combine_chunks() if isinstance(line, pa.ChunkedArray) else line).cast(pa.binary())
