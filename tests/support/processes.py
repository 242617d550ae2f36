"""Small helpers for tests that drive child processes and the command line."""

from __future__ import annotations

import multiprocessing
import subprocess
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest


def stop(process: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float = 30) -> None:
    """Terminate ``process`` and wait for it; kill it if it does not exit within ``timeout`` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def one_line(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """The single stderr line of a failed command; it must contain ``needles`` and no traceback."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@dataclass
class Outcome:
    results: dict[Any, Any]  # what each process put under its key
    exit_codes: dict[Any, int | None]


def run_lined_up(
    target: Callable[..., None], args_by_key: Mapping[Hashable, tuple[Any, ...]], deadline_s: float
) -> Outcome:
    """``target(*args, barrier, results, key)`` in one spawned process per key, all sharing one barrier (of them all)
    and one results dict; each joined within ``deadline_s``. A process still running then is killed and fails the
    test. Plain processes, not a pool: a pool's result hand-off once hung such a test inside the suite."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier, results = manager.Barrier(len(args_by_key)), manager.dict()
        processes = {
            key: ctx.Process(target=target, args=(*args, barrier, results, key)) for key, args in args_by_key.items()
        }
        for p in processes.values():
            p.start()
        for p in processes.values():
            p.join(timeout=deadline_s)
        stuck = [key for key, p in processes.items() if p.is_alive()]
        for key in stuck:
            processes[key].kill()
        assert not stuck, f"still running after {deadline_s} s: {stuck}"
        return Outcome(dict(results), {key: p.exitcode for key, p in processes.items()})
