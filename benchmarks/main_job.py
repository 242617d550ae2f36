"""Benchmark: `logistics-platform run` (the main job) against DuckDB's raw read_json -> Parquet of the same lines.

Generates N days (default 2) at a given order volume (default 15,000 orders a day, the generator's default
pings a day) with the generator's default anomaly mix, then times, in one run on the same machine:

  * the limit: DuckDB reading every landed line (``read_json`` with schema inference, and ``read_json_objects``,
    one statement per topic) and writing it as Parquet; the faster of the two is the limit;
  * the main job: ``run_pipeline`` (what `logistics-platform run` does) on a fresh warehouse and Dagster home.

Prints the ratio limit / main job (higher is better), the number of Dagster runs, and snapshots per bronze table.

    .venv/bin/python benchmarks/main_job.py                       # 2 days, 15,000 orders/day
    .venv/bin/python benchmarks/main_job.py --days 1 --orders-per-day 3000   # quick look
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.connections import load_catalog
from logistics_platform.pipeline import run_pipeline, table_counts
from logistics_platform.settings import local_settings


def raw_limit(landing: Path, out: Path, reader: str) -> tuple[float, int]:
    """Seconds for DuckDB to read every landed line with ``reader`` and write it as Parquet, and the rows written.

    ``read_json`` infers a typed schema per topic; ``read_json_objects`` keeps each line as one JSON value (no
    inference: the floor of reading and writing the bytes).
    """
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    rows = 0
    started = time.perf_counter()
    for spec in bs.TOPICS.values():
        files = [str(p) for p in (landing / "topics" / spec.topic).rglob("*.json*") if p.is_file()]
        if not files:
            continue
        target = out / f"{spec.table}.parquet"
        con.execute(
            f"copy (select * from {reader}(?, format = 'newline_delimited', ignore_errors = true)) "
            f"to '{target}' (format parquet)",
            [files],
        )
        (n,) = con.execute(f"select count(*) from read_parquet('{target}')").fetchone() or (0,)
        rows += int(n)
    elapsed = time.perf_counter() - started
    con.close()
    return elapsed, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--orders-per-day", type=int, default=15_000)
    parser.add_argument("--pings-per-day", type=int, default=GeneratorConfig(start=datetime(2026, 11, 1)).pings_per_day)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench_main_job_"))
    os.environ["DAGSTER_HOME"] = str(root / "dagster_home")
    (root / "dagster_home").mkdir()
    (root / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    # The Dagster home as `logistics-platform run` has it (SQLite run and event storage): without it the runs would
    # go to an in-memory instance, which costs Dagster far less per event than the instance an operator has.
    settings = local_settings(root, dagster_home=root / "dagster_home")
    try:
        config = GeneratorConfig(
            start=datetime(2026, 11, 1),
            hours=24 * args.days,
            seed=args.seed,
            orders_per_day=args.orders_per_day,
            pings_per_day=args.pings_per_day,
        )
        generate(settings.landing_dir, config)

        typed_s, raw_rows = raw_limit(settings.landing_dir, root / "raw_parquet", "read_json")
        objects_s, _ = raw_limit(settings.landing_dir, root / "raw_parquet", "read_json_objects")
        limit_s = min(typed_s, objects_s)

        started = time.perf_counter()
        summary = run_pipeline(settings)
        run_s = time.perf_counter() - started
        counts_started = time.perf_counter()
        table_counts(settings)
        counts_s = time.perf_counter() - counts_started
        if not summary.ok:
            raise SystemExit(f"the main job failed:\n{summary.render()}")

        catalog = load_catalog(settings)
        log = catalog.load_table(f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}").scan().to_arrow()
        lines = sum(log.column("lines").to_pylist())
        snapshots = {
            name: len(catalog.load_table(f"{bs.NAMESPACE}.{name}").snapshots())
            for _ns, name in sorted(catalog.list_tables(bs.NAMESPACE))
        }
        ingest_runs = sum(1 for r in summary.runs if r.job.startswith("ingest"))
        instance = dg.DagsterInstance.get()
        per_job: dict[str, float] = {}
        for r in summary.runs:
            stats = instance.get_run_stats(r.run_id)
            if stats.start_time is not None and stats.end_time is not None:
                per_job[r.job] = per_job.get(r.job, 0.0) + stats.end_time - stats.start_time
        print(f"arrival hours: {len(summary.partitions)}, landed lines: {lines:,} (raw read_json rows: {raw_rows:,})")
        print(f"limit: DuckDB read_json -> Parquet {typed_s:.2f} s, read_json_objects -> Parquet {objects_s:.2f} s")
        print(f"main job (logistics-platform run):   {run_s:.1f} s  ({lines / run_s:,.0f} lines/s)")
        print(f"ratio limit / main job: {limit_s / run_s:.4f} (read_json alone: {typed_s / run_s:.4f})")
        per_run = settings.ingest_max_hours_per_run
        print(f"Dagster runs: {len(summary.runs)} ({ingest_runs} ingest; INGEST_MAX_HOURS_PER_RUN={per_run})")
        print(
            "run time by job: "
            + ", ".join(f"{j} {t:.1f} s" for j, t in per_job.items())
            + f"; the summary's row counts {counts_s:.1f} s; the rest is loading definitions and launching runs"
        )
        print("snapshots per bronze table: " + ", ".join(f"{n}={c}" for n, c in snapshots.items()))
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
