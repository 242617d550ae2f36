"""Benchmark: `logistics-platform run` (the main job) against DuckDB's raw read_json -> Parquet of the same lines.

Generates N days (default 2) at a given order volume (default 15,000 orders a day, the generator's default
pings a day) with the generator's default anomaly mix, then times, in one run on the same machine:

  * the limit: DuckDB reading every landed line (``read_json`` with schema inference, and ``read_json_objects``,
    one statement per topic) and writing it as Parquet; the faster of the two is the limit;
  * the main job: ``run_pipeline`` (what `logistics-platform run` does) on a fresh warehouse and Dagster home.

Prints the ratio limit / main job (higher is better), the number of Dagster runs, and snapshots per bronze table.
Then, on a second fresh Dagster home, Dagster's own floor: no-op twins of the partitioned assets and their checks (the
same keys, partitions -- bronze by arrival hour, the dbt layer by arrival day -- and runs, nothing computed), i.e.
what recording the runs costs whatever the code does, and its share of the main job. Also the largest number of
materializations one run recorded (it grows with the days a transform run covers, not its hours).

    .venv/bin/python benchmarks/main_job.py                       # 2 days, 15,000 orders/day
    .venv/bin/python benchmarks/main_job.py --days 1 --orders-per-day 3000   # quick look
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb

from logistics_platform.cli.render import render_summary
from logistics_platform.definitions import build_definitions
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.operate.landing_watch import RANGE_END_TAG, RANGE_START_TAG, run_partition_bounds
from logistics_platform.pipeline import QUIET, Summary, run_pipeline, table_counts
from logistics_platform.settings import Settings, local_settings

DAGSTER_YAML = "telemetry:\n  enabled: false\n"


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


def _twin(
    name: str, partitions: dg.PartitionsDefinition, keys: list[dg.AssetKey], checks: list[dg.AssetCheckKey]
) -> dg.AssetsDefinition:
    """One multi-asset with ``keys`` and ``checks``, partitioned like ours, that materializes and passes them all."""

    @dg.multi_asset(
        name=name,
        specs=[dg.AssetSpec(k) for k in keys],
        check_specs=[dg.AssetCheckSpec(c.name, asset=c.asset_key) for c in checks],
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def twin() -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        for key in keys:
            yield dg.MaterializeResult(asset_key=key)
        for check in checks:
            yield dg.AssetCheckResult(asset_key=check.asset_key, check_name=check.name, passed=True)

    return twin


def dagster_floor(settings: Settings, summary: Summary, home: Path) -> tuple[float, str]:
    """Seconds a fresh SQLite instance takes for no-op twins of the main job's partitioned runs, and what they held.

    Each twin run materializes the partitioned assets and evaluates the checks that its real run recorded, over
    the same arrival hours, and computes nothing.
    """
    instance = dg.DagsterInstance.get()
    real = build_definitions(settings)
    graph = real.resolve_asset_graph()
    recorded: dict[str, tuple[set[dg.AssetKey], set[dg.AssetCheckKey]]] = {}
    for record in summary.runs:
        keys, checks = recorded.setdefault(record.job, (set(), set()))
        for event in instance.all_logs(record.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            key = event.get_dagster_event().asset_key
            if key is not None and graph.get(key).partitions_def is not None:
                keys.add(key)
        for event in instance.all_logs(record.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            data = event.get_dagster_event().event_specific_data
            if isinstance(data, dg.AssetCheckEvaluation) and data.asset_key in keys:
                checks.add(dg.AssetCheckKey(data.asset_key, data.check_name))
    recorded = {job: held for job, held in recorded.items() if held[0]}
    twins = {}
    for job, (k, c) in recorded.items():
        partitions = real.resolve_job_def(job).partitions_def
        assert partitions is not None, job
        twins[job] = _twin(f"{job}_twin", partitions, sorted(k, key=str), sorted(c, key=str))
    defs = dg.Definitions(
        assets=list(twins.values()),
        jobs=[
            dg.define_asset_job(f"{job}_twin_job", selection=dg.AssetSelection.assets(t)) for job, t in twins.items()
        ],
    )
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    twin_instance = dg.DagsterInstance.local_temp(str(home))
    # The real runs' partition bounds, read before the clock starts.
    twin_runs: list[tuple[str, tuple[str, str]]] = []
    for record in summary.runs:
        run = instance.get_run_by_id(record.run_id)
        bounds = run_partition_bounds(run.tags) if run is not None else None
        if record.job in twins and bounds is not None:
            twin_runs.append((record.job, bounds))
    started = time.perf_counter()
    for job, (first, last) in twin_runs:
        result = defs.resolve_job_def(f"{job}_twin_job").execute_in_process(
            instance=twin_instance, tags={RANGE_START_TAG: first, RANGE_END_TAG: last}, run_config=QUIET
        )
        if not result.success:
            raise SystemExit(f"the no-op twin of {job} {first}..{last} failed")
    seconds = time.perf_counter() - started
    held = "; ".join(
        f"{job}: {len(k)} assets, {len(c)} checks, {sum(1 for r in summary.runs if r.job == job)} run(s)"
        for job, (k, c) in recorded.items()
    )
    return seconds, f"{len(twin_runs)} runs over {len(summary.partitions)} hours; {held}"


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
    (root / "dagster_home" / "dagster.yaml").write_text(DAGSTER_YAML)
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
            raise SystemExit(f"the main job failed:\n{render_summary(summary)}")

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
        floor_s, held = dagster_floor(settings, summary, root / "twin_home")
        print(f"Dagster alone, no-op twins of the partitioned runs ({held}): {floor_s:.1f} s")
        print(f"share of the main job that is Dagster recording its runs: {floor_s / run_s:.2f}")
        most = max(
            (len(instance.all_logs(r.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)), r.job)
            for r in summary.runs
        )
        print(f"largest run: {most[0]} materializations ({most[1]})")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
