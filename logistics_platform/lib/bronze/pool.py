"""Parsing blocks in this process or in worker processes kept for the life of the process, each with its parsers
and a record of how the clean path fared on whole blocks (docs/internals/ingest.md, "Parse workers")."""

from __future__ import annotations

import atexit
import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.blocks import BlockResult, BlockTask, parse_block
from logistics_platform.lib.bronze.envelope import LineParser

PARALLEL_MIN_BYTES = 32 * 1024 * 1024  # below this an hour is parsed in-process (no pool start-up cost)

_PARSERS: dict[tuple[Any, ...], LineParser] = {}
# Per parser: [whole blocks taken by the clean path, whole blocks it declined].
_WHOLE_BLOCKS: dict[tuple[Any, ...], list[int]] = {}
_EXECUTORS: dict[int, ProcessPoolExecutor] = {}


def run_block(task: BlockTask) -> BlockResult:
    """:func:`~logistics_platform.lib.bronze.blocks.parse_block` with this process's parser and whole-block record."""
    key = (task.table, task.hour, task.lateness_seconds, task.evolved, task.decimal_mode, task.renames)
    if (parser := _PARSERS.get(key)) is None:
        if len(_PARSERS) > 64:
            _PARSERS.clear()
            _WHOLE_BLOCKS.clear()
        spec = bs.TOPICS.get(task.table) or bs.spec_of(task.topic)
        evolved, renames = dict(task.evolved), dict(task.renames)
        parser = LineParser(spec, task.hour, task.lateness_seconds, evolved, task.decimal_mode, renames)
        _PARSERS[key] = parser
    stats = _WHOLE_BLOCKS.setdefault(key, [0, 0])
    result = parse_block(task, parser, whole_first=stats[1] < 2 or stats[0] >= stats[1])
    if result.whole_block is not None:
        stats[0 if result.whole_block else 1] += 1
    return result


def _executor(workers: int) -> ProcessPoolExecutor:
    """A process pool (spawned: forking a process that runs threads is unsafe) kept for the life of this process."""
    ex = _EXECUTORS.get(workers)
    if ex is None or getattr(ex, "_broken", False):
        ex = _EXECUTORS[workers] = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        atexit.register(ex.shutdown, cancel_futures=True)
    return ex


def shutdown_workers() -> None:
    """Stop the parse worker processes now (they are otherwise stopped when this process exits)."""
    while _EXECUTORS:
        _, ex = _EXECUTORS.popitem()
        ex.shutdown(cancel_futures=True)


class BlockPool:
    """Ordered map over block tasks: in this process, or in worker processes with a bounded window."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.executor = _executor(workers) if workers > 1 else None

    def map(self, tasks: Iterator[BlockTask]) -> Iterator[tuple[BlockTask, BlockResult]]:
        """(task, result) for each task, in the order of ``tasks``."""
        if self.executor is None:
            for task in tasks:
                yield task, run_block(task)
            return
        window: deque[tuple[BlockTask, Future[BlockResult]]] = deque()
        try:
            for task in tasks:
                window.append((task, self.executor.submit(run_block, task)))
                if len(window) > 2 * self.workers:
                    t, fut = window.popleft()
                    yield t, fut.result()
            while window:
                t, fut = window.popleft()
                yield t, fut.result()
        finally:
            for _, fut in window:  # on an error, do not leave parsed blocks of this hour queued
                fut.cancel()
