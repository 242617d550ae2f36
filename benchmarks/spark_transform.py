"""Benchmark: the dbt transform on DuckDB (target `local`) and on Spark (target `spark`, local[*]) on the same data.

Generates a small history, ingests every arrival hour but the last into one bronze catalog per engine (the same
landing files), then for each engine times, through dagster-dbt's DbtCliResource as the platform runs dbt:

  * a full refresh (models only, no tests) of the history,
  * one new arrival hour (ingested, then built incrementally with the hour as the window), and
  * that hour re-run as the hourly Dagster run builds it (data tests included), with the audit gate that lets the
    marts' main move: on DuckDB the publish step after dbt (lib/transform/publish.py), on Spark dbt's own hooks
    (dbt_project/macros/spark/audit_gate.sql, their seconds from run_results.json),

and prints the Spark / DuckDB ratio of the first two, and each gate's seconds against its dbt run's. Wall clock
includes dbt's start-up, and on Spark the JVM's and the Spark session's (dbt-spark `method: session`); dbt's
per-model execution times are summed beside it.

    .venv/bin/python benchmarks/spark_transform.py                 # 1 day, 2,000 orders/day (~15 min on 2 vCPUs)
    .venv/bin/python benchmarks/spark_transform.py --days 2 --orders-per-day 5000
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib import connections
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import list_arrival_hours
from logistics_platform.lib.transform.project import DbtRun, run_dbt, window_vars
from logistics_platform.lib.transform.publish import publish_marts
from logistics_platform.settings import PROJECT_ROOT, Settings, local_settings

MODELS_ONLY = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]
DATA_TESTS = ["--exclude-resource-type", "unit_test"]
# dbt's hooks of the Spark audit gate (dbt_project.yml: on-run-start's second, on-run-end's first).
GATE_HOOKS = ("operation.logistics.logistics-on-run-start-1", "operation.logistics.logistics-on-run-end-0")


def say(text: str) -> None:
    print(text, flush=True)


def model_seconds(run: DbtRun) -> float:
    return sum(float(r.get("execution_time") or 0.0) for r in run.results)


def gate_seconds(settings: Settings, run: DbtRun) -> float:
    """Seconds the audit gate of the run's target took: DuckDB's publish step, run here; Spark's hooks in ``run``."""
    if settings.dbt_target == "spark":
        return sum(float(r.get("execution_time") or 0.0) for r in run.results if r["unique_id"] in GATE_HOOKS)
    con = connections.connect(settings.duckdb_path, read_only=True, settings=settings)
    try:
        started = time.perf_counter()
        publish_marts(connections.load_catalog(settings), con)
        return time.perf_counter() - started
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument("--orders-per-day", type=int, default=2000)
    parser.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--targets", nargs="+", default=["local", "spark"], choices=["local", "spark"])
    args = parser.parse_args()
    subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "spark_env.sh")], check=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="spark-bench-"))
    landing = work / "landing"
    config = GeneratorConfig(
        start=datetime(2026, 11, 1),
        hours=24 * args.days,
        seed=5,
        orders_per_day=args.orders_per_day,
        pings_per_day=args.orders_per_day * 25,
    )
    say(f"generating {args.days} day(s), {args.orders_per_day} orders/day into {landing}")
    generate(landing, config)
    hours = list_arrival_hours(landing)
    say(f"uptime: {os.getloadavg()}")
    results: dict[str, dict[str, float]] = {}
    for target in args.targets:
        settings = local_settings(work / target, landing_dir=landing).with_overrides(dbt_target=target)
        for hour in hours[:-1]:
            ingest_hour(settings, hour)
        say(f"[{target}] full refresh of {len(hours) - 1} arrival hours")
        full = run_dbt(settings, ["build", "--full-refresh", *MODELS_ONLY], target_path=work / f"t-{target}")
        if target == "local":
            gate_seconds(settings, full)  # the first publish writes every mart whole; an hourly one is measured below
        ingest_hour(settings, hours[-1])
        say(f"[{target}] one new arrival hour ({hours[-1]:%Y-%m-%d %H}:00)")
        new = run_dbt(
            settings, ["build", *MODELS_ONLY], window=window_vars(hours[-1]), target_path=work / f"t-{target}"
        )
        say(f"[{target}] the same hour as the hourly run builds it (data tests), then its audit gate")
        hourly = run_dbt(
            settings, ["build", *DATA_TESTS], window=window_vars(hours[-1]), target_path=work / f"t-{target}"
        )
        gate = gate_seconds(settings, hourly)
        results[target] = {
            "full": full.seconds,
            "full_models": model_seconds(full),
            "hour": new.seconds,
            "hour_models": model_seconds(new),
        }
        say(
            f"[{target}] full refresh {full.seconds:.1f} s wall ({model_seconds(full):.1f} s in models); "
            f"new hour {new.seconds:.1f} s wall ({model_seconds(new):.1f} s in models)"
        )
        say(
            f"[{target}] audit gate {gate:.1f} s against the hourly dbt build's {hourly.seconds:.1f} s wall "
            f"({model_seconds(hourly):.1f} s in models and tests): gate/dbt {gate / hourly.seconds:.3f}"
        )
    say(f"load average after: {os.getloadavg()}")
    if set(results) != {"local", "spark"}:
        return
    duck, spark = results["local"], results["spark"]
    say(
        f"full refresh: DuckDB {duck['full']:.1f} s, Spark {spark['full']:.1f} s, "
        f"Spark/DuckDB {spark['full'] / duck['full']:.1f}x (models {spark['full_models'] / duck['full_models']:.1f}x)"
    )
    say(
        f"one new hour: DuckDB {duck['hour']:.1f} s, Spark {spark['hour']:.1f} s, "
        f"Spark/DuckDB {spark['hour'] / duck['hour']:.1f}x (models {spark['hour_models'] / duck['hour_models']:.1f}x)"
    )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
