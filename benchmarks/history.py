"""Benchmark: does one new arrival hour through dbt cost more as the history grows? (30 vs 90 days)

Generates one landing zone of ``--long`` days (default 90) plus half a day, then in ONE warehouse:

  1. ingests the first ``--short`` days (default 30) and 12 hours with range ingest (one run of 24 hours at a time;
     the nightly bronze maintenance batched every ``--maintain-every`` simulated days, and once more before the
     measurement), builds every model with ``--full-refresh`` (timed:
     the full refresh at that history), re-runs the last history hour incrementally (untimed, as its hourly run
     would have), then times the next arrival hour (12:00) as the Dagster dbt step runs it
     (dbt through dagster-dbt's ``DbtCliResource``, every model), ``--repeat`` times, the catalog and the DuckDB file
     restored to the state before the hour each time;
  2. ingests on up to ``--long`` days and 12 hours, builds everything again with ``--full-refresh`` (timed), and
     times the 12:00 hour after that the same way.

It prints, for each history, the median wall clock and CPU time (ours and the dbt child's) of the new hour, its
model-time sum and start-up, its CPU share of the full refresh, and the ratio of the new hour at the long history to
the short one (target: at most 1.15x). The two histories are measured one after the other, so the ratio is taken on
CPU seconds, which the machine's other load barely moves; the wall-clock ratio is printed beside it.
Both new hours are at 12:00 of their day; their bronze row counts are printed (the generator's daily volume is
flat, so they are of the same size).

    .venv/bin/python benchmarks/history.py                      # 30 vs 90 days, 5,000 orders/day
    .venv/bin/python benchmarks/history.py --short 7 --long 21  # quicker
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

from incremental import MODELS_ONLY, PINGS_PER_ORDER, TimedHour, maintain_bronze, retention_cutoff, say, timed_hour

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze.ingest import ingest_hour, ingest_hours
from logistics_platform.lib.bronze.landing import list_arrival_hours
from logistics_platform.lib.transform.project import DbtRun, run_dbt, window_vars
from logistics_platform.settings import Settings, local_settings

TARGET = 1.15


def ingest_range(settings: Settings, hours: list[datetime], day_ends: list[float], maintain_every: int) -> None:
    """Range ingest of ``hours`` in runs of 24, bronze maintenance on the simulated calendar every ``maintain_every``
    days and after the last run (0: never)."""
    started = time.perf_counter()
    retention_days = int(settings.snapshot_retention_days)
    for n, i in enumerate(range(0, len(hours), 24), start=1):
        ingest_hours(settings, hours[i : i + 24])
        day_ends.append(time.time())
        last = i + 24 >= len(hours)
        if maintain_every and (n % maintain_every == 0 or last):
            maintain_bronze(settings, retention_cutoff(day_ends, retention_days))
        done = min(i + 24, len(hours))
        say(f"  ingested {done}/{len(hours)} arrival hours ({time.perf_counter() - started:.0f}s)")


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (the dbt process): what the machine's other load
    barely moves, unlike the wall clock."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def full_refresh(settings: Settings, target: Path) -> DbtRun:
    """Every model rebuilt from all of bronze (the history's state for the new hours after it)."""
    return run_dbt(settings, ["build", "--full-refresh", *MODELS_ONLY], target_path=target)


def time_new_hour(
    settings: Settings, root: Path, hour: datetime, target: Path, repeat: int
) -> tuple[list[TimedHour], list[float], int]:
    """The new hour ``repeat`` times from the same state: (timed runs, their CPU seconds, its bronze rows)."""
    catalog_db = root / "warehouse" / "catalog.db"
    saved_catalog = root / "catalog.before.db"
    saved_duckdb = root / "analytics.before.duckdb"
    shutil.copyfile(catalog_db, saved_catalog)
    shutil.copyfile(settings.duckdb_path, saved_duckdb)
    runs: list[TimedHour] = []
    cpus: list[float] = []
    rows = 0
    for i in range(repeat):
        shutil.copyfile(saved_catalog, catalog_db)
        shutil.copyfile(saved_duckdb, settings.duckdb_path)
        rows = ingest_hour(settings, hour).rows
        cpu = cpu_seconds()
        timed = timed_hour(settings, window_vars(hour), target)
        cpus.append(cpu_seconds() - cpu)
        say(
            f"  {hour:%Y-%m-%d %H:00} run {i + 1}/{repeat}: {timed.run.seconds:.2f}s, CPU {cpus[-1]:.2f}s "
            f"(start-up {timed.run.startup_seconds or 0:.2f}s, models {sum(timed.run.timings.values()):.2f}s)"
        )
        runs.append(timed)
    # Back to the history's state: the next phase ingests this hour as part of its history.
    shutil.copyfile(saved_catalog, catalog_db)
    shutil.copyfile(saved_duckdb, settings.duckdb_path)
    return runs, cpus, rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--short", type=int, default=30, help="days of history for the first measurement")
    p.add_argument("--long", type=int, default=90, help="days of history for the second measurement")
    p.add_argument("--orders-per-day", type=int, default=5_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--work-dir", type=Path, help="default: .work/history/<long>d-<orders>o-s<seed>")
    p.add_argument(
        "--maintain-every",
        type=int,
        default=7,
        help="simulated days between bronze maintenance runs (0: none); it also runs before each measurement",
    )
    args = p.parse_args(argv)
    if not 0 < args.short < args.long:
        p.error("--short must be positive and below --long")
    pings = round(args.orders_per_day * PINGS_PER_ORDER)
    root = (
        args.work_dir
        or Path(__file__).parent / ".work" / "history" / f"{args.long}d-{args.orders_per_day}o-s{args.seed}"
    ).resolve()
    settings = local_settings(root)
    generated = root / "landing.done"
    if not generated.exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        config = GeneratorConfig(
            start=datetime(2026, 11, 1),
            hours=24 * args.long + 13,
            seed=args.seed,
            orders_per_day=args.orders_per_day,
            pings_per_day=pings,
        )
        started = time.perf_counter()
        say(f"generating {args.long} days and 13 hours, {args.orders_per_day:,} orders/day, {pings:,} pings/day ...")
        generate(settings.landing_dir, config)
        generated.write_text("ok")
        say(f"  generated in {time.perf_counter() - started:.0f}s")
    else:
        # A fresh warehouse on the kept landing zone: every run measures the same histories from nothing.
        for stale in ("warehouse", "dbt_target", "catalog.before.db", "analytics.before.duckdb"):
            path = root / stale
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    settings.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    hours = list_arrival_hours(settings.landing_dir)
    target = root / "dbt_target"
    run_dbt(settings, ["parse"], target_path=target)
    day_ends: list[float] = []
    results = []
    ingested = 0
    for days in (args.short, args.long):
        history = 24 * days + 12
        say(f"history of {days} days: ingesting up to {hours[history - 1]:%Y-%m-%d %H:00} ...")
        ingest_range(settings, hours[ingested:history], day_ends, args.maintain_every)
        ingested = history
        say("  full refresh ...")
        cpu = cpu_seconds()
        full = full_refresh(settings, target)
        full_cpu = cpu_seconds() - cpu
        say(f"  full refresh of {history} arrival hours: {full.seconds:.1f}s, CPU {full_cpu:.1f}s")
        # As production has it: the hour before was processed by its own hourly run after the build (the first
        # incremental run after a full build also pays a one-off DuckDB checkpoint of the freshly built tables).
        timed_hour(settings, window_vars(hours[history - 1]), target)
        runs, cpus, rows = time_new_hour(settings, root, hours[history], target, args.repeat)
        results.append((days, history, full, full_cpu, runs, cpus, rows))

    say("")
    load = os.getloadavg()
    say(
        f"one new arrival hour through dbt at {args.short} and {args.long} days of history "
        f"({args.orders_per_day:,} orders/day, {pings:,} pings/day; median of {args.repeat}; load {load[0]:.1f})"
    )
    say(
        f"{'history':<10}{'hour':>18}{'rows':>9}{'new hour s':>12}{'CPU s':>8}{'start-up s':>12}{'models s':>10}"
        f"{'full refresh s':>16}{'CPU s':>8}{'share (CPU)':>13}"
    )
    walls, cpu_medians = [], []
    for days, history, full, full_cpu, runs, cpus, rows in results:
        wall = statistics.median(r.run.seconds for r in runs)
        cpu = statistics.median(cpus)
        startup = statistics.median(r.run.startup_seconds or 0.0 for r in runs)
        models = statistics.median(sum(r.run.timings.values()) for r in runs)
        walls.append(wall)
        cpu_medians.append(cpu)
        hour = hours[history]
        say(
            f"{days:>3} days  {hour:%Y-%m-%d %H:00}{rows:>9,}{wall:>12.2f}{cpu:>8.2f}{startup:>12.2f}{models:>10.2f}"
            f"{full.seconds:>16.2f}{full_cpu:>8.1f}{cpu / full_cpu:>13.1%}"
        )
    growth = cpu_medians[1] / cpu_medians[0]
    verdict = "meets" if growth <= TARGET else "misses"
    say(
        f"new hour at {args.long} days / at {args.short} days: {growth:.2f}x CPU, {walls[1] / walls[0]:.2f}x wall "
        f"(target <= {TARGET}x, on CPU seconds: {verdict})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
