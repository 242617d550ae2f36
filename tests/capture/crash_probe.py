"""Run as a process: capture, and SIGKILL this process once the batch is durable but before the slot is confirmed.

Usage: python -m tests.capture.crash_probe <dsn> <landing_dir> <slot>
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from logistics_platform.lib.capture.replication import STAGE_DURABLE
from logistics_platform.lib.capture.runner import run_capture
from logistics_platform.settings import local_settings


def _die(stage: str, lsn: int) -> None:
    if stage == STAGE_DURABLE:
        os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    dsn, landing, slot = sys.argv[1:4]
    settings = local_settings(Path(landing).parent, oltp_dsn=dsn, capture_slot=slot, capture_publication=slot)
    run_capture(settings, hook=_die)


if __name__ == "__main__":
    main()
