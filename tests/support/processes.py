"""Small helpers for tests that drive child processes and the command line."""

from __future__ import annotations

import subprocess

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
