"""Benchmark: the main job at 1x and 10x the demo's daily volume, and the Dagster ingest job against its engine.

    .venv/bin/python benchmarks/volume.py                  # 7 days at 1x and 10x (2,400 / 24,000 orders a day)
    .venv/bin/python benchmarks/volume.py --days 1 --ingest-only   # a trial run

For each volume (1x: the generator's demo defaults, 2,400 orders and 60,000 pings a day; 10x: 24,000 and 600,000),
``--days`` days of clean landing files (generated once, cached under benchmarks/.work/volume), then, each in its own
child process on a fresh warehouse (so that CPU seconds and peak RSS are its own; INGEST_WORKERS=1):

  * engine: ``ingest_hours`` called directly on the landing zone, over the same hour ranges that `run` cuts
    (INGEST_MAX_HOURS_PER_RUN consecutive hours each);
  * main job: ``run_pipeline`` (what `logistics-platform run` does) on a fresh SQLite Dagster home; the CPU seconds
    of its ingest runs (from the first ingest run's launch to the last one's end) are "Dagster ingest", the whole
    call (definitions, ingest runs, dbt, publish) is "main job" (not with ``--ingest-only``);
  * the same ingest runs on a PostgreSQL instance (a throwaway cluster, as production's ``dagster.prod.yaml`` stores
    events, with its ``DAGSTER_EVENT_BATCH_SIZE``): the CPU seconds are the run's process plus the whole server's
    (postmaster, its live backends and those it reaped), over the same window;
  * Dagster's floor: a no-op twin of the ingest multi-asset (the same asset keys, checks and hourly partitions,
    nothing computed, no metadata) run over the same hour ranges on a fresh SQLite home: what Dagster itself
    costs to record such runs (a planned event and a materialization per asset and hour), whatever the code does.

Prints lines per CPU-second of each, 10x over 1x, the Dagster ingest job's CPU over the engine's (target <= 1.3x),
and each child's peak RSS (bounded by the batch size, not the history: compare the volumes and ``--days``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.capture.cluster import Cluster, logical_cluster

if TYPE_CHECKING:
    from logistics_platform.settings import Settings

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "volume"
START = datetime(2026, 11, 1)
DEMO = {"orders_per_day": 2_400, "pings_per_day": 60_000}
DAGSTER_YAML = "telemetry:\n  enabled: false\n"


def cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children (user + system)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def server_cpu(postmaster: int) -> float:
    """CPU seconds of a PostgreSQL server: the postmaster, the children it reaped and its live children."""
    tick = os.sysconf("SC_CLK_TCK")

    def fields(pid: str | int) -> list[str]:  # /proc/PID/stat after the command name: state, ppid, ... (proc(5))
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()

    own = fields(postmaster)
    total = sum(int(v) for v in own[11:15])  # utime, stime, cutime, cstime
    for entry in Path("/proc").iterdir():
        try:
            f = fields(entry.name) if entry.name.isdigit() else None
        except OSError:  # gone meanwhile: reaped, so counted in the postmaster's cutime
            continue
        if f is not None and f[1] == str(postmaster):
            total += int(f[11]) + int(f[12])
    return total / tick


def landing_zone(days: int, scale: int, seed: int) -> tuple[Path, int]:
    """The clean landing zone of ``days`` days at ``scale`` x the demo volume, and its lines (cached)."""
    from logistics_platform.generator import GeneratorConfig, generate

    landing = WORK / f"landing-{scale}x-{days}d-{seed}"
    marker = landing / "_generation.json"
    if not marker.exists():
        print(f"generating {days} days at {scale}x into {landing} ...", flush=True)
        shutil.rmtree(landing, ignore_errors=True)
        volumes = {k: v * scale for k, v in DEMO.items()}
        generate(landing, GeneratorConfig.clean(START, hours=24 * days, seed=seed, **volumes))
    return landing, int(json.loads(marker.read_text())["totals"]["lines"])


class _IngestDone(Exception):
    """Raised from the progress callback to stop `run` after its ingest runs (``--ingest-only``)."""


def child(mode: str, landing: Path, root: Path, ingest_only: bool, pg: str | None = None) -> dict[str, float]:
    """Run one contender in this (child) process; CPU seconds and peak RSS. ``pg``: socket dir, port and postmaster
    pid of the server holding the instance's storage (its CPU is counted with the run's)."""
    from logistics_platform.lib.bronze.ingest import ingest_hours
    from logistics_platform.lib.timekeys import parse_hour_key
    from logistics_platform.pipeline import Progress, hour_ranges, landed_partitions, run_pipeline
    from logistics_platform.settings import local_settings

    home = root / "dagster_home"
    home.mkdir(parents=True)
    yaml = DAGSTER_YAML
    postmaster = 0
    if pg is not None:
        socket_dir, port, pid = pg.split(":")
        postmaster = int(pid)
        url = f"postgresql+psycopg2://postgres@/dagster?host={socket_dir}&port={port}"
        yaml += f'storage:\n  postgres:\n    postgres_url: "{url}"\n'
    (home / "dagster.yaml").write_text(yaml)
    os.environ["DAGSTER_HOME"] = str(home)
    settings = local_settings(root, landing_dir=landing, dagster_home=home, ingest_workers=1)
    out: dict[str, float] = {}
    if mode == "floor":
        out["ingest_cpu"] = dagster_floor(settings)
    elif mode == "engine":
        keys, _ = landed_partitions(settings, datetime.now(UTC))
        ranges = hour_ranges(keys, settings.ingest_max_hours_per_run)
        began = cpu_seconds()
        for r in ranges:
            ingest_hours(settings, [parse_hour_key(k) for k in r])
        out["ingest_cpu"] = cpu_seconds() - began
    else:
        marks: dict[str, float] = {}

        def cpu() -> float:
            return cpu_seconds() + (server_cpu(postmaster) if postmaster else 0.0)

        def progress(p: Progress) -> None:
            marks.setdefault("start", cpu())
            if p.hours_done == p.hours_total and "end" not in marks:
                marks["end"] = cpu()
                marks["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                if ingest_only:
                    raise _IngestDone

        began = cpu_seconds()
        try:
            summary = run_pipeline(settings, progress=progress)
            if not summary.ok:
                raise SystemExit(f"the main job failed: {[r.error for r in summary.runs if not r.success]}")
            out["main_cpu"] = cpu_seconds() - began
        except _IngestDone:
            pass
        out["ingest_cpu"], out["ingest_rss_mb"] = marks["end"] - marks["start"], marks["rss"]
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def dagster_floor(settings: Settings) -> float:
    """CPU seconds of the no-op twin of the ingest multi-asset over `run`'s hour ranges."""
    import dagster as dg

    from logistics_platform.defs.bronze.checks import bronze_check_specs
    from logistics_platform.defs.bronze.keys import BRONZE_ASSET_KEYS
    from logistics_platform.defs.partitions import arrival_hour_partitions
    from logistics_platform.lib.operate.landing_watch import RANGE_END_TAG, RANGE_START_TAG
    from logistics_platform.pipeline import QUIET, hour_ranges, landed_partitions

    checks = bronze_check_specs()

    @dg.multi_asset(
        specs=[dg.AssetSpec(k) for k in BRONZE_ASSET_KEYS],
        check_specs=checks,
        partitions_def=arrival_hour_partitions(settings),
        backfill_policy=dg.BackfillPolicy.single_run(),
    )
    def twin():  # type: ignore[no-untyped-def]  # no annotation: Dagster resolves it at runtime
        for key in BRONZE_ASSET_KEYS:
            yield dg.MaterializeResult(asset_key=key)
        for c in checks:
            yield dg.AssetCheckResult(asset_key=c.asset_key, check_name=c.name, passed=True)

    job = dg.Definitions(assets=[twin], jobs=[dg.define_asset_job("twin", selection=[twin])]).resolve_job_def("twin")
    instance = dg.DagsterInstance.get()
    keys, _ = landed_partitions(settings, datetime.now(UTC))
    began = cpu_seconds()
    for r in hour_ranges(keys, settings.ingest_max_hours_per_run):
        tags = {RANGE_START_TAG: r[0], RANGE_END_TAG: r[-1]}
        if not job.execute_in_process(instance=instance, tags=tags, run_config=QUIET).success:
            raise SystemExit("the no-op twin failed")
    return cpu_seconds() - began


def run_child(mode: str, landing: Path, ingest_only: bool, pg: str | None = None) -> dict[str, float]:
    root = WORK / f"run-{mode}{'-pg' if pg else ''}"
    shutil.rmtree(root, ignore_errors=True)
    cmd = [sys.executable, __file__, "--child", mode, "--landing", str(landing), "--root", str(root)]
    cmd += ["--pg", pg] if pg else []
    done = subprocess.run([*cmd, *(["--ingest-only"] if ingest_only else [])], capture_output=True, text=True)
    shutil.rmtree(root, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--ingest-only", action="store_true", help="stop `run` after its ingest runs (no dbt)")
    parser.add_argument("--child", choices=["engine", "dagster", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--landing", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--pg", help=argparse.SUPPRESS)
    parser.add_argument("--no-postgres", action="store_true", help="skip the run on a PostgreSQL instance")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    if args.child:
        print(json.dumps(child(args.child, args.landing, args.root, args.ingest_only, args.pg)))
        return

    load = os.getloadavg()
    when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    print(f"{when}, {args.days} days, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    rates: dict[tuple[str, int], float] = {}
    with contextlib.ExitStack() as stack:
        cluster = None if args.no_postgres else stack.enter_context(logical_cluster())
        for scale in args.scales:
            measure(args, scale, cluster, rates)
    if len(args.scales) == 2:
        lo, hi = args.scales
        for what in ("engine", "dagster", "dagster_pg", "main"):
            if (what, lo) in rates and (what, hi) in rates:
                print(f"{what} lines/CPU-s {hi}x / {lo}x: {rates[what, hi] / rates[what, lo]:.2f} (target >= 1)")


def fresh_database(cluster: Cluster) -> str:
    """An empty ``dagster`` database on the cluster; the ``--pg`` argument of a child that stores its runs there."""
    import psycopg2

    admin = psycopg2.connect(host=str(cluster.socket_dir), port=cluster.port, user="postgres", dbname="postgres")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("drop database if exists dagster")
        cur.execute("create database dagster")
    admin.close()
    pid = (cluster.socket_dir / "data" / "postmaster.pid").read_text().split()[0]
    return f"{cluster.socket_dir}:{cluster.port}:{pid}"


def measure(args: argparse.Namespace, scale: int, cluster: Cluster | None, rates: dict[tuple[str, int], float]) -> None:
    """Every contender on the landing zone of one volume; prints their figures."""
    landing, lines = landing_zone(args.days, scale, args.seed)
    engine = run_child("engine", landing, args.ingest_only)
    dagster = run_child("dagster", landing, args.ingest_only)
    floor = run_child("floor", landing, args.ingest_only)
    on_pg = None if cluster is None else run_child("dagster", landing, True, fresh_database(cluster))
    rates["engine", scale] = lines / engine["ingest_cpu"]
    rates["dagster", scale] = lines / dagster["ingest_cpu"]
    print(f"{scale}x: {lines:,} lines over {args.days * 24} arrival hours")
    print(
        f"  engine (ingest_hours)  {engine['ingest_cpu']:7.1f} CPU-s  {rates['engine', scale]:9,.0f} lines/CPU-s  "
        f"peak RSS {engine['peak_rss_mb']:,.0f} MB"
    )
    print(
        f"  Dagster ingest job     {dagster['ingest_cpu']:7.1f} CPU-s  {rates['dagster', scale]:9,.0f} lines/CPU-s "
        f"peak RSS {dagster['ingest_rss_mb']:,.0f} MB at its end, {dagster['peak_rss_mb']:,.0f} MB the whole `run`"
    )
    if "main_cpu" in dagster:
        rates["main", scale] = lines / dagster["main_cpu"]
        main_cpu = dagster["main_cpu"]
        print(f"  main job (`run`)       {main_cpu:7.1f} CPU-s  {rates['main', scale]:9,.0f} lines/CPU-s")
    e, d, f = engine["ingest_cpu"], dagster["ingest_cpu"], floor["ingest_cpu"]
    print(f"  Dagster's floor (no-op twin) {f:7.1f} CPU-s; the job beyond engine + floor: {d - e - f:.1f} CPU-s")
    print(f"  Dagster job CPU / engine CPU: {d / e:.2f}x (target <= 1.3x); engine + floor: {(e + f) / e:.2f}x")
    if on_pg is not None:
        p = on_pg["ingest_cpu"]
        rates["dagster_pg", scale] = lines / p
        print(
            f"  Dagster ingest job, PostgreSQL instance (events batched; the server's CPU included) {p:7.1f} CPU-s  "
            f"{rates['dagster_pg', scale]:9,.0f} lines/CPU-s"
        )
        print(f"  Dagster job CPU / engine CPU on the PostgreSQL instance: {p / e:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    main()
