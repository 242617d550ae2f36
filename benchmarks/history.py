"""Benchmark: does the main job's new hour cost more as the history grows? (7, 90 and 365 days)

Generates one landing zone of the longest history (``--days``, default 7,90,365) plus a day, ending before now (so
every hour is an arrival-hour partition), kept aside; then in ONE warehouse and one Dagster home, for each history
in turn:

  1. lands the hours up to ``days`` days and 12 hours into the landing zone and runs the main job on them (one
     catch-up `run`: range ingest in runs of 31 days, one transform run, publish and audit; then the nightly bronze
     maintenance, as production runs it: compaction, manifests merged, older snapshots expired; untimed);
  2. lands the next hour (12:00) and times ``logistics-platform run`` (``run_pipeline``: it finds the one changed
     hour against bronze.ingest_log, ingests it, runs dbt over its window, publishes and audits the marts),
     ``--repeat`` times from the same state (catalog, DuckDB file and Dagster home restored each time).

After each history it prints, per history so far, the median CPU seconds of the new hour (this process and its
waited-for children, the dbt process: ``getrusage``), the wall clock of the whole run and of its Dagster runs, the
publish and audit seconds the publish reports, the dbt models that took longest, and each history's CPU ratio to the
first (target: at most 1.15x; on CPU seconds, which the machine's other load moves far less than the wall clock).

    .venv/bin/python benchmarks/history.py --orders-per-day 100                # 7, 90, 365 days (small world)
    .venv/bin/python benchmarks/history.py --days 7,90 --orders-per-day 100    # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from incremental import PINGS_PER_ORDER, maintain_bronze, say

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze.landing import TOPICS_DIR, list_arrival_hours
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.lib.transform.project import project_target
from logistics_platform.pipeline import Summary, run_pipeline
from logistics_platform.settings import Settings, local_settings

TARGET = 1.15
STATE = ("warehouse/catalog.db", "warehouse/analytics.duckdb", "dagster_home")


@dataclass
class Measured:
    """One timed run of the new hour."""

    cpu: float
    wall: float
    summary: Summary
    publish: dict[str, float] = field(default_factory=dict)  # publish_seconds, audit_seconds (run metadata)
    models: dict[str, float] = field(default_factory=dict)  # dbt model -> execution seconds


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (the dbt processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def land(source: Path, landing: Path, hours: list[datetime]) -> None:
    """Move the folders of ``hours`` (every topic) from the generated zone into the landing zone."""
    for hour in hours:
        for folder in (source / TOPICS_DIR).glob(f"*/dt={hour:%Y-%m-%d}/hr={hour:%H}"):
            target = landing / folder.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            folder.rename(target)


def dbt_model_seconds(settings: Settings, since: float) -> dict[str, float]:
    """Model -> execution seconds of the newest dbt run_results.json written after ``since`` (epoch seconds)."""
    found = [p for p in project_target(settings).rglob("run_results.json") if p.stat().st_mtime >= since]
    if not found:
        return {}
    results = json.loads(max(found, key=lambda p: p.stat().st_mtime).read_text())["results"]
    models = [r for r in results if r["unique_id"].startswith("model.")]
    return {r["unique_id"].split(".")[-1]: float(r["execution_time"]) for r in models}


def publish_seconds(settings: Settings, run_ids: list[str]) -> dict[str, float]:
    """publish_seconds and audit_seconds summed over the published marts' materializations of ``run_ids``."""
    import dagster as dg

    out: dict[str, float] = {}
    instance = dg.DagsterInstance.get()
    for run_id in run_ids:
        for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
            materialization = record.asset_materialization
            if materialization is None:
                continue
            for name in ("publish_seconds", "audit_seconds"):
                value = materialization.metadata.get(name)
                if value is not None and isinstance(value.value, int | float):
                    out[name] = out.get(name, 0.0) + float(value.value)
    return out


def measure(settings: Settings, root: Path, repeat: int) -> list[Measured]:
    """The main job over the one new hour, ``repeat`` times from the same state (the last run's state kept)."""
    saved = root / "saved"
    shutil.rmtree(saved, ignore_errors=True)
    for rel in STATE:
        src, dst = root / rel, saved / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(src, dst) if src.is_dir() else shutil.copyfile(src, dst)
    runs = []
    for i in range(repeat):
        if i:
            for rel in STATE:
                src, dst = saved / rel, root / rel
                if dst.is_dir():
                    shutil.rmtree(dst)
                shutil.copytree(src, dst) if src.is_dir() else shutil.copyfile(src, dst)
        began, cpu, stamp = time.perf_counter(), cpu_seconds(), time.time()
        summary = run_pipeline(settings)
        m = Measured(cpu_seconds() - cpu, time.perf_counter() - began, summary)
        if not summary.ok or summary.partitions != summary.partitions[:1] or len(summary.partitions) != 1:
            raise SystemExit(f"the measured run is not one ok new hour: {summary.partitions} {summary.runs}")
        m.publish = publish_seconds(settings, [r.run_id for r in summary.runs])
        m.models = dbt_model_seconds(settings, stamp)
        jobs = ", ".join(f"{r.job} {r.seconds:.2f}s" for r in summary.runs)
        parts = ", ".join(f"{k} {v:.2f}s" for k, v in m.publish.items())
        say(
            f"  {summary.partitions[0]} run {i + 1}/{repeat}: CPU {m.cpu:.2f}s, wall {m.wall:.2f}s ({jobs}; {parts}; "
            f"dbt models {sum(m.models.values()):.2f}s)"
        )
        runs.append(m)
    return runs


def report(results: list[tuple[int, datetime, list[Measured]]], orders_per_day: int, pings: int, repeat: int) -> None:
    """The table of the histories measured so far, and each one's CPU ratio to the first (printed after each)."""
    say("")
    load = os.getloadavg()
    say(
        f"the main job (`logistics-platform run`) for one new hour at {', '.join(str(r[0]) for r in results)} days of "
        f"history ({orders_per_day:,} orders/day, {pings:,} pings/day; median of {repeat}; load {load[0]:.1f})"
    )
    say(
        f"{'history':<10}{'hour':>18}{'CPU s':>8}{'wall s':>8}{'ingest s':>10}{'transform s':>13}"
        f"{'publish s':>11}{'audit s':>9}{'dbt models s':>14}"
    )
    cpus = []
    for d, hour, runs in results:
        cpu = statistics.median(r.cpu for r in runs)
        cpus.append(cpu)

        def med(pick: object, runs: list[Measured] = runs) -> float:
            return statistics.median(pick(r) for r in runs)  # type: ignore[operator]

        ingest = med(lambda r: sum(x.seconds for x in r.summary.runs if x.job.startswith("ingest")))
        transform = med(lambda r: sum(x.seconds for x in r.summary.runs if not x.job.startswith("ingest")))
        say(
            f"{d:>4} days {hour:%Y-%m-%d %H:00}{cpu:>8.2f}{med(lambda r: r.wall):>8.2f}{ingest:>10.2f}"
            f"{transform:>13.2f}"
            f"{med(lambda r: r.publish.get('publish_seconds', 0.0)):>11.2f}"
            f"{med(lambda r: r.publish.get('audit_seconds', 0.0)):>9.2f}{med(lambda r: sum(r.models.values())):>14.2f}"
        )
    for d, _, runs in (results[0], results[-1]):
        slowest = sorted(runs[-1].models.items(), key=lambda kv: -kv[1])[:6]
        say(f"  slowest models at {d} days: " + ", ".join(f"{m} {s:.2f}s" for m, s in slowest))
    for i in range(1, len(results)):
        growth = cpus[i] / cpus[0]
        verdict = "meets" if growth <= TARGET else "misses"
        say(
            f"new hour at {results[i][0]} days / at {results[0][0]} days: {growth:.2f}x CPU "
            f"(target <= {TARGET}x: {verdict})"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--days", default="7,90,365", help="histories in days, ascending, comma-separated")
    p.add_argument("--orders-per-day", type=int, default=100)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--work-dir", type=Path, help="default: .work/history/<longest>d-<orders>o-s<seed>")
    args = p.parse_args(argv)
    days = [int(d) for d in args.days.split(",")]
    if days != sorted(set(days)) or days[0] < 1:
        p.error("--days must be positive and ascending, e.g. 7,90,365")
    pings = round(args.orders_per_day * PINGS_PER_ORDER)
    root = (
        args.work_dir
        or Path(__file__).parent / ".work" / "history" / f"{days[-1]}d-{args.orders_per_day}o-s{args.seed}"
    ).resolve()
    source = root / "generated"
    # The zone ends a day before today: every hour of it is an arrival-hour partition now.
    start = datetime.now(UTC).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0)
    start -= timedelta(days=days[-1] + 2)
    done = root / "generated.done"
    if not done.exists() or done.read_text() != start.isoformat():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        config = GeneratorConfig(
            start=start, hours=24 * days[-1] + 13, seed=args.seed, orders_per_day=args.orders_per_day,
            pings_per_day=pings,
        )  # fmt: skip
        began = time.perf_counter()
        say(f"generating {days[-1]} days and 13 hours from {start:%Y-%m-%d}, {args.orders_per_day:,} orders/day ...")
        generate(source, config)
        done.write_text(start.isoformat())
        say(f"  generated in {time.perf_counter() - began:.0f}s")
    # A fresh warehouse, Dagster home and landing zone on the kept generated zone.
    for rel in ("landing", "warehouse", "dagster_home", "saved"):
        if (root / rel).exists():
            land(root / rel, source, list_arrival_hours(root / rel)) if rel == "landing" else None
            shutil.rmtree(root / rel, ignore_errors=True)
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    settings = local_settings(root, dagster_home=home, partitions_start=hour_key(start))
    # The catch-up in runs of a month (fewer Dagster runs to set up the history; the new hour is one hour either way).
    catch_up_settings = local_settings(
        root, dagster_home=home, partitions_start=hour_key(start), ingest_max_hours_per_run=24 * 31
    )
    settings.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    hours = list_arrival_hours(source)
    results: list[tuple[int, datetime, list[Measured]]] = []
    landed = 0
    for d in days:
        # The first hour with files from `d` days and 12 hours on (a small world leaves some night hours empty).
        new = next(i for i, h in enumerate(hours) if h >= start + timedelta(days=d, hours=12))
        say(f"history of {d} days: landing and running up to {hours[new - 1]:%Y-%m-%d %H:00} ...")
        land(source, settings.landing_dir, hours[landed:new])
        began = time.perf_counter()
        catch_up = run_pipeline(catch_up_settings)
        if not catch_up.ok:
            raise SystemExit(f"the catch-up run failed: {catch_up.runs}")
        # As the nightly maintenance leaves bronze (compacted, older snapshots expired): production's steady state.
        maintain_bronze(settings, expire_before=time.time())
        say(f"  catch-up of {len(catch_up.partitions)} hours, maintenance: {time.perf_counter() - began:.0f}s")
        land(source, settings.landing_dir, [hours[new]])
        landed = new + 1
        results.append((d, hours[new], measure(settings, root, args.repeat)))
        report(results, args.orders_per_day, pings, args.repeat)

    return 0


if __name__ == "__main__":
    sys.exit(main())
