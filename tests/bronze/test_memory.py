"""Bounded memory: an arrival hour 10x larger must not need more than 1.5x the memory to ingest."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from logistics_platform.settings import local_settings
from tests.support.bronze import bulk_hour

HOUR = datetime(2026, 11, 1)
PROBE = Path(__file__).with_name("memory_probe.py")
BATCH_ROWS = 2000  # small batches so that even the 1x hour spans several of them


def _peak(root: Path, scale: int) -> dict[str, int]:
    settings = local_settings(root)
    bulk_hour(settings.landing_dir, HOUR, pings=1500 * scale, orders=500 * scale)
    out = subprocess.run(
        [sys.executable, str(PROBE), str(root), HOUR.isoformat(), str(BATCH_ROWS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_peak_memory_does_not_grow_with_the_hour(tmp_path):
    small = _peak(tmp_path / "x1", 10)  # 20k lines
    large = _peak(tmp_path / "x10", 100)  # 200k lines
    assert large["lines"] >= 9 * small["lines"] >= 9 * 5 * BATCH_ROWS
    grow_small = small["peak_rss_bytes"] - small["baseline_rss_bytes"]
    grow_large = large["peak_rss_bytes"] - large["baseline_rss_bytes"]
    assert grow_large <= 1.5 * grow_small, (small, large)
    assert large["arrow_peak_bytes"] <= 1.5 * small["arrow_peak_bytes"], (small, large)
