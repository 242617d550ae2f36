"""One topic's landing files of one arrival hour -> data files of its bronze table (written, not committed),
parsed block by block; unknown columns are added (schema evolution) and their block parsed again."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
from functools import cache, partial
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyiceberg.types import IcebergType, StringType

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.avro import read_file as read_avro_file
from logistics_platform.lib.bronze.blocks import (
    BLOCK_BYTES,
    FAST_RUN_LINES,
    MIN_BLOCK_BYTES,
    BlockResult,
    BlockTask,
    CorruptRead,
    iter_counted_blocks,
)
from logistics_platform.lib.bronze.envelope import LineParser, raw_line_text
from logistics_platform.lib.bronze.incidents import ACCEPTED, note_incident, renames_of
from logistics_platform.lib.bronze.landing import LandingFile
from logistics_platform.lib.bronze.pool import BlockPool, run_block
from logistics_platform.lib.bronze.reports import TopicReport
from logistics_platform.lib.bronze.tables import add_columns, evolved_columns
from logistics_platform.lib.bronze.values import infer_iceberg_type
from logistics_platform.lib.bronze.writer import BatchWriter
from logistics_platform.lib.timekeys import epoch_micros
from logistics_platform.settings import Settings

log = logging.getLogger(__name__)


def write_topic_hour(
    catalog: Catalog,
    table: Table,
    spec: bs.TopicSpec,
    hour: datetime,
    files: list[LandingFile],
    settings: Settings,
    quarantine: BatchWriter,
    report: TopicReport,
    pool: BlockPool,
    fast_run_lines: int = FAST_RUN_LINES,
) -> BatchWriter:
    """Parse ``files`` and write their rows as data files of ``table``; returns the flushed writer (its ``table``
    as last loaded, its ``files`` to commit). Quarantine rows go to ``quarantine`` (not flushed), counts to ``report``.
    """
    writer = BatchWriter(table, settings.ingest_batch_rows)
    lateness = settings.allowed_lateness_seconds
    state: dict[str, Any] = {"evolved": tuple(evolved_columns(table, spec).items()), "schema": writer.arrow_schema}

    corrupt: list[CorruptRead] = []
    renames = tuple(sorted(renames_of(table.properties).items()))  # accepted renames (lib/bronze/incidents.py)
    new_task = partial(BlockTask, spec.table, hour, lateness, topic=spec.topic, renames=renames)
    mode = settings.debezium_decimal_handling_mode
    if not spec.key:  # outside the contract: no declared columns for the vectorised paths, every line parsed alone
        fast_run_lines = 0

    def tasks() -> Iterator[BlockTask]:
        for f in files:
            if f.avro:
                continue  # read below, a file at a time
            try:
                for block, first, newlines in iter_counted_blocks(f, block_bytes):
                    evolved, schema = state["evolved"], state["schema"]
                    yield new_task(
                        evolved, schema, block, f.kafka_partition, first, f.relpath, fast_run_lines, newlines, mode
                    )
            except CorruptRead as e:  # its readable lines are in the tasks above; the file gets one row
                corrupt.append(e)

    @cache
    def avro_parser(evolved: tuple[tuple[str, IcebergType], ...]) -> LineParser:
        return LineParser(spec, hour, lateness, dict(evolved), mode, dict(renames))

    def read_avro(f: LandingFile) -> tuple[BlockResult, CorruptRead | None]:
        return read_avro_file(avro_parser(state["evolved"]), f, state["schema"], vectorised=bool(spec.key))

    def rerun_block(task: BlockTask) -> BlockResult:
        return run_block(replace(task, evolved=state["evolved"], arrow_schema=state["schema"]))

    def reread_avro(f: LandingFile) -> BlockResult:
        return read_avro(f)[0]

    reasons: Counter[str] = Counter()

    def take(res: BlockResult, again: Callable[[], BlockResult]) -> None:
        nonlocal table
        while res.unknown is not None or res.wider:
            # Columns to add (types from this first line, or accepted) or to promote: evolve the table, parse again.
            writer.flush()
            text = {k[len(ACCEPTED) :] for k in table.properties if k.startswith(ACCEPTED)}
            unknown = (res.unknown or {}).items()
            types = {n: StringType() if n in text else infer_iceberg_type(v) for n, v in unknown} | res.wider
            report.added_columns.update(add_columns(catalog, spec.identifier, types, res.unknown_at))
            table = catalog.load_table(spec.identifier)
            writer.reset(table)
            state["evolved"], state["schema"] = tuple(evolved_columns(table, spec).items()), writer.arrow_schema
            res = again()
        writer.add_table(res.rows)
        for q in res.quarantine:
            quarantine.add(q)
            note_incident(report.incidents, q)
        report.lines += res.lines
        report.rows += res.rows.num_rows if res.rows is not None else 0
        report.tombstones += res.tombstones
        report.read_fast_lines += res.fast_lines
        report.late_events += res.late
        reasons.update(res.reasons)

    # A block's rows are in memory at once: keep blocks near the batch size (assuming ~256 bytes a line).
    block_bytes = min(BLOCK_BYTES, max(MIN_BLOCK_BYTES, settings.ingest_batch_rows * 256))
    for task, result in pool.map(tasks()):
        take(result, partial(rerun_block, task))
    for f in files:
        if f.avro:
            result, damaged = read_avro(f)  # alone: each container has its own writer schema
            take(result, partial(reread_avro, f))
            if damaged is not None:
                corrupt.append(damaged)
    writer.flush()
    hour_us = epoch_micros(hour)
    for c in corrupt:
        text, enc = raw_line_text(c.tail)
        address = (spec.topic, c.file.kafka_partition, c.offset, c.file.relpath, hour_us)
        quarantine.add((*address, bs.REASON_CORRUPT_FILE, c.detail(), text, enc))
        report.corrupt_files[c.file.relpath] = c.detail()
        log.warning("%s: %s", c.file.relpath, c.detail())
    report.quarantined = sum(reasons.values())
    report.quarantined_by_reason = dict(sorted(reasons.items()))
    report.data_files = len(writer.files)
    return writer
