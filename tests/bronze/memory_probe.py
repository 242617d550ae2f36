"""Ingest one arrival hour in a fresh process and print its peak memory as JSON (used by tests and benchmarks).

Usage: python tests/bronze/memory_probe.py <root> <arrival hour ISO> <batch rows> [--tracemalloc]
"""

from __future__ import annotations

import json
import resource
import sys
import tracemalloc
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.settings import local_settings


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def main(argv: list[str]) -> None:
    root, hour, batch = Path(argv[0]), datetime.fromisoformat(argv[1]), int(argv[2])
    trace = "--tracemalloc" in argv
    settings = local_settings(root, ingest_batch_rows=batch, ingest_workers=1)
    if trace:
        tracemalloc.start()
    from logistics_platform.lib.bronze.tables import ensure_bronze_tables
    from logistics_platform.lib.connections import load_catalog

    ensure_bronze_tables(load_catalog(settings))  # imports, catalog and tables: the fixed part of the footprint
    baseline = _rss_now()
    report = ingest_hour(settings, hour)
    out = {
        "lines": report.lines,
        "rows": report.rows,
        "seconds": report.duration_seconds,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "baseline_rss_bytes": baseline,
        "arrow_peak_bytes": pa.default_memory_pool().max_memory(),
    }
    if trace:
        out["python_peak_bytes"] = tracemalloc.get_traced_memory()[1]
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
