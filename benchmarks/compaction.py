"""Benchmark: analytic scans over a bronze table of many small hourly files, before and after maintenance.

Builds ``bronze.orders`` (bronze schema, day partitions, event-time sort order) from ``--days`` x 24 hourly
commits (>= 500 small files by default), then times in one run:

* a typical analytic scan: one day of orders aggregated by region, through DuckDB ``iceberg_scan`` and through
  pyiceberg (+ pyarrow group-by), and the same over the whole table;
* compaction (and the manifest consolidation that the nightly job runs right after it);
* the same scans after compaction and after compaction + manifest consolidation.

Results must be identical before and after (asserted). Ratios are against the "before" scan of the same run.

    .venv/bin/python benchmarks/compaction.py [--days 21] [--rows-per-hour 200] [--repeat 5] [--root DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from logistics_platform.lib.connections import connect, load_catalog  # noqa: E402
from logistics_platform.lib.maintenance.compaction import compact_table  # noqa: E402
from logistics_platform.lib.maintenance.manifests import rewrite_manifests  # noqa: E402
from logistics_platform.settings import local_settings  # noqa: E402
from tests.support.synthetic import append_hour, create_bronze_table  # noqa: E402

START = datetime(2026, 11, 1)


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Median wall time of ``repeat`` runs (after one warm-up) and the last result."""
    result = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def duck_query(con: duckdb.DuckDBPyConnection, metadata_location: str, where: str) -> list[tuple]:
    return con.execute(
        f"""
        select region, count(*) as orders, sum(total_amount) as revenue
        from iceberg_scan('{metadata_location}')
        where {where}
        group by region order by region
        """
    ).fetchall()


def pyiceberg_query(table, row_filter: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    rows: pa.Table = table.scan(row_filter=row_filter, selected_fields=("region", "total_amount")).to_arrow()
    agg = rows.group_by("region").aggregate([("region", "count"), ("total_amount", "sum")]).sort_by("region")
    return list(
        zip(
            agg.column("region").to_pylist(),
            agg.column("region_count").to_pylist(),
            pc.cast(agg.column("total_amount_sum"), pa.decimal128(38, 2)).to_pylist(),
            strict=True,
        )
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=21, help="days of hourly commits (default 21 = 504 files)")
    ap.add_argument("--rows-per-hour", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per measurement (median)")
    ap.add_argument("--root", type=Path, help="state directory (default: a temp dir)")
    args = ap.parse_args()

    root = args.root or Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    catalog = load_catalog(local_settings(root))
    table = create_bronze_table(catalog)
    hours = args.days * 24
    t0 = time.perf_counter()
    for h in range(hours):
        append_hour(table, START + timedelta(hours=h), args.rows_per_hour, seed=h)
        if h % 100 == 99:
            print(f"  .. {h + 1}/{hours} hourly commits", file=sys.stderr)
    build_s = time.perf_counter() - t0
    files = len(list(table.scan().plan_files()))
    print(f"table: {hours} hourly commits, {files} data files, {hours * args.rows_per_hour:,} rows ({build_s:.1f}s)")
    assert files >= 500 or args.days < 21, "the benchmark needs at least 500 small files"

    day = START + timedelta(days=args.days // 2)
    lo, hi = day, day + timedelta(days=1)
    day_where = f"_arrival_hour >= TIMESTAMP '{lo:%Y-%m-%d %H:%M}' and _arrival_hour < TIMESTAMP '{hi:%Y-%m-%d %H:%M}'"
    day_filter = f"_arrival_hour >= '{lo.isoformat()}' and _arrival_hour < '{hi.isoformat()}'"
    # One DuckDB connection for the whole run: extension loading is setup, not part of a scan.
    con = connect()
    queries: dict[str, Callable[[], object]] = {
        "one day by region, DuckDB iceberg_scan": lambda: duck_query(con, table.metadata_location, day_where),
        "one day by region, pyiceberg + pyarrow": lambda: pyiceberg_query(table, day_filter),
        "all days by region, DuckDB iceberg_scan": lambda: duck_query(con, table.metadata_location, "true"),
        "all days by region, pyiceberg + pyarrow": lambda: pyiceberg_query(table, "true"),
    }

    def measure() -> dict[str, tuple[float, object]]:
        return {name: timed(q, args.repeat) for name, q in queries.items()}

    before = measure()
    t0 = time.perf_counter()
    result = compact_table(table, small_file_bytes=32 << 20, target_file_bytes=128 << 20)
    compact_s = time.perf_counter() - t0
    files_after = len(list(table.scan().plan_files()))
    after_compaction = measure()
    t0 = time.perf_counter()
    manifests = rewrite_manifests(table, max_manifests=10)
    manifests_s = time.perf_counter() - t0
    after_all = measure()

    for name in queries:
        assert before[name][1] == after_compaction[name][1] == after_all[name][1], f"{name}: results differ"
    # DuckDB and pyiceberg agree with each other too.
    assert before[queries_key(queries, 0)][1] == before[queries_key(queries, 1)][1]

    print(
        f"compaction: {len(result.committed)} partitions, {result.files_rewritten} -> {result.files_written} files "
        f"in {compact_s:.2f}s; manifests {manifests.manifests_before} -> {manifests.manifests_after} "
        f"in {manifests_s:.2f}s"
    )
    print(f"data files: {files} -> {files_after}; results identical before/after: yes\n")
    print("| scan | before (s) | after compaction (s) | speed-up | + manifests consolidated (s) | speed-up |")
    print("|---|---|---|---|---|---|")
    for name in queries:
        b, c, m = before[name][0], after_compaction[name][0], after_all[name][0]
        print(f"| {name} | {b:.3f} | {c:.3f} | {b / c:.1f}x | {m:.3f} | {b / m:.1f}x |")
    worst = min(before[n][0] / after_compaction[n][0] for n in queries)
    verdict = "met" if worst >= 3 else "NOT met"
    print(f"\ntarget (every scan >= 3x faster after compaction): {verdict} (lowest {worst:.1f}x)")
    print(f"(median of {args.repeat} runs after a warm-up; {Path(root)})")
    return 0


def queries_key(queries: dict[str, Callable[[], object]], i: int) -> str:
    return list(queries)[i]


if __name__ == "__main__":
    sys.exit(main())
