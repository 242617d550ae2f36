"""Benchmark: one new arrival hour through dbt (incremental) against a full refresh of the same data.

Generates N days of history (default 30 days, 20,000 orders/day with their pings at the generator's density), ingests
every arrival hour but the last into bronze, builds everything, then ingests the last hour and times

  * the incremental run of that one arrival hour as the Dagster dbt step runs it: every model, through dagster-dbt's
    DbtCliResource (a dbt child process), the window in LOGISTICS_DBT_MIN/MAX_ARRIVAL_HOUR, and
  * a `--full-refresh` of the same data (all hours), through the same resource, in the same run, on the same machine,

and prints the ratio (target: new hour <= 5% of the full refresh) with per-model timings from dbt's node results.
Both dbt targets are parsed first (untimed), as for every scheduled run (partial parsing). Wall clock includes what
dbt does before its first node (process start, imports, partial parse, connection, plugin); the model-time ratio
(sum of per-model execution times) shows the part that scales with data. For comparison, the same window is re-run
(idempotent) with the window as `--vars` (dbt then parses the whole project again), and as a whole Dagster run of
the dbt assets (`dagster.materialize`, the step's dagster-dbt event handling
included). The hour before the new one is processed first as its hourly run did (the first incremental run after
the full build of the history): timed and printed, not the headline.

    .venv/bin/python benchmarks/incremental.py                # 30 days, 20k orders/day, 500k pings/day (~45 min)
    .venv/bin/python benchmarks/incremental.py --days 7       # a week of history
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from logistics_platform.defs.transform.assets import build_dbt_assets
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import list_arrival_hours
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.maintenance import list_iceberg_tables, maintain_catalog
from logistics_platform.lib.maintenance.options import MaintenanceOptions
from logistics_platform.lib.transform.arrival_window import ArrivalWindow
from logistics_platform.lib.transform.project import DbtRun, run_dbt, window_vars
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, local_settings

# "With their pings": the generator's default ratio of pings to orders (60,000 to 2,400: 25 per order, a ping every
# ~2 minutes of a ~51-minute trip). A phone app reports far more often; this keeps the history ingest in minutes.
_DEFAULTS = GeneratorConfig(start=datetime(2026, 11, 1))
PINGS_PER_ORDER = _DEFAULTS.pings_per_day / _DEFAULTS.orders_per_day
MODELS_ONLY = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]


def say(text: str) -> None:
    print(text, flush=True)


def ingested_hours(settings: Settings) -> set[datetime]:
    """Arrival hours already in bronze (from bronze.ingest_log, committed last for an hour)."""
    catalog = load_catalog(settings)
    if not catalog.table_exists("bronze.ingest_log"):
        return set()
    rows = catalog.load_table("bronze.ingest_log").scan(selected_fields=("arrival_hour",)).to_arrow()
    return set(rows.column("arrival_hour").to_pylist())


def maintain_bronze(settings: Settings, expire_before: float | None = None) -> None:
    """As the nightly maintenance would: compaction, manifest consolidation and snapshot expiry of the bronze tables.

    ``expire_before`` (wall clock, time.time()) stands in for "now - SNAPSHOT_RETENTION_DAYS" on the simulated
    calendar: the history is ingested in minutes, so a wall-clock retention of 7 days would expire nothing and every
    table would carry a snapshot per ingested hour, which production never does.
    """
    started = time.perf_counter()
    catalog = load_catalog(settings)
    options = MaintenanceOptions.from_settings(settings)
    if expire_before is not None:
        options = replace(options, snapshot_retention=timedelta(seconds=max(time.time() - expire_before, 0.0)))
    maintain_catalog(catalog, options, tables=list_iceberg_tables(catalog, ("bronze",)))
    say(f"  bronze maintenance (compaction, manifests, expiry) in {time.perf_counter() - started:.0f}s")


def retention_cutoff(day_ends: list[float], retention_days: int) -> float | None:
    """Wall-clock time at which the simulated day ``retention_days`` before the last one finished ingesting."""
    return day_ends[-1 - retention_days] if len(day_ends) > retention_days else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--orders-per-day", type=int, default=20_000)
    p.add_argument(
        "--pings-per-day",
        type=int,
        help=f"default: the generator's own density, {PINGS_PER_ORDER:g} pings per order (one per ~2 min of a trip)",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--work-dir", type=Path, help="default: .work/incremental/<days>d-<orders>o-<pings>p-s<seed>")
    p.add_argument("--reuse", action="store_true", help="reuse generated + ingested history in --work-dir")
    p.add_argument(
        "--resume", action="store_true", help="keep the generated landing zone and the hours already ingested"
    )
    p.add_argument("--history-hours", type=int, help="arrival hours of history (default: all generated but the last)")
    p.add_argument("--no-maintenance", action="store_true", help="skip bronze maintenance after the history ingest")
    args = p.parse_args(argv)

    if args.pings_per_day is None:
        args.pings_per_day = round(args.orders_per_day * PINGS_PER_ORDER)
    if args.work_dir is None:
        # One directory per volume: --reuse must never time a history generated with other settings.
        volume = f"{args.days}d-{args.orders_per_day}o-{args.pings_per_day}p-s{args.seed}"
        args.work_dir = Path(__file__).parent / ".work" / "incremental" / volume
    root = args.work_dir.resolve()
    settings = local_settings(root)
    marker = root / "history.done"
    if not args.resume and not (args.reuse and marker.exists()):
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        config = GeneratorConfig(
            start=datetime(2026, 11, 1),
            hours=24 * args.days,
            seed=args.seed,
            orders_per_day=args.orders_per_day,
            pings_per_day=args.pings_per_day,
        )
        started = time.perf_counter()
        say(f"generating {args.days} days, {args.orders_per_day:,} orders/day, {args.pings_per_day:,} pings/day ...")
        generate(settings.landing_dir, config)
        say(f"  generated in {time.perf_counter() - started:.0f}s")
    hours = list_arrival_hours(settings.landing_dir)
    if not marker.exists():
        history_hours = min(args.history_hours or len(hours) - 1, len(hours) - 1)
        done = ingested_hours(settings) if args.resume else set()
        todo = [h for h in hours[:history_hours] if h not in done]
        started = time.perf_counter()
        day_ends: list[float] = []
        retention_days = int(settings.snapshot_retention_days)
        for i, hour in enumerate(todo, start=1):
            ingest_hour(settings, hour)
            if i % 24 == 0:
                say(f"  ingested {i}/{len(todo)} arrival hours ({time.perf_counter() - started:.0f}s)")
                day_ends.append(time.time())
                if not args.no_maintenance:
                    # As the nightly job does, on the simulated calendar. Without it each table carries a snapshot
                    # and a manifest per hour ingested so far (612 of each after 25 days, ~0.9 MB of metadata JSON
                    # rewritten on every commit and read by every DuckDB scan): the history ingest slows from ~1 s
                    # to ~9 s per hour, and each bronze scan of a dbt run from ~15 ms to ~130 ms.
                    maintain_bronze(settings, retention_cutoff(day_ends, retention_days))
        if not args.no_maintenance:
            day_ends.append(time.time())
            maintain_bronze(settings, retention_cutoff(day_ends, retention_days))
        marker.write_text(str(history_hours))
    history_hours = int(marker.read_text())
    # The SQL catalog is the only pointer to bronze's current snapshots: keeping a copy taken before the new hour
    # lets --reuse measure a genuinely new hour again (the files it wrote last time become unreferenced; pyiceberg
    # then logs "Failed to delete metadata file" for old metadata versions the last run already pruned: harmless).
    catalog_db = root / "warehouse" / "catalog.db"
    history_catalog = root / "catalog.history.db"
    if not history_catalog.exists():
        shutil.copyfile(catalog_db, history_catalog)
    else:
        shutil.copyfile(history_catalog, catalog_db)
    new_hour = hours[history_hours]
    target = root / "dbt_target"

    full_settings = settings.with_overrides(duckdb_path=root / "full_refresh.duckdb")
    say("building the history (full build of every hour but the last) ...")
    history = run_dbt(settings, ["build", "--full-refresh", *MODELS_ONLY], target_path=target)
    say(f"  history built in {history.seconds:.1f}s")
    # In production the hour before was processed by its own hourly run, not by a full build; the first incremental
    # run after a full build also pays a one-off DuckDB checkpoint of the freshly built tables.
    before = hours[history_hours - 1]
    previous = timed_hour(settings, window_vars(before), target)
    say(f"  the hour before ({before:%Y-%m-%d %H:00}), the first after the full build: {previous.run.seconds:.2f}s")

    say(f"ingesting the new arrival hour {new_hour:%Y-%m-%d %H:00} ...")
    report = ingest_hour(settings, new_hour)
    say(f"  {report.rows:,} rows")

    full_target = root / "dbt_target_full"
    # Untimed: both timed runs start from a parsed project (partial parsing), as every scheduled run does.
    run_dbt(full_settings, ["parse"], target_path=full_target)
    window = window_vars(new_hour)
    # Timed as the Dagster step runs it: every model, the window in the environment.
    incremental = timed_hour(settings, window, target)
    say(f"  the new hour: dbt {incremental.run.seconds:.2f}s (start-up {incremental.run.startup_seconds or 0:.2f}s)")
    # The same window again (idempotent) as --vars, which changes dbt's parse state (a target of its own, started
    # from the same state, so that the runs after it are not affected).
    vars_target = root / "dbt_target_vars"
    shutil.rmtree(vars_target, ignore_errors=True)
    vars_target.mkdir(parents=True)
    shutil.copyfile(target / "partial_parse.msgpack", vars_target / "partial_parse.msgpack")
    as_vars = timed_dbt(settings, ["build", *MODELS_ONLY], window, target_path=vars_target)
    # And as a whole Dagster run of the dbt assets (its data tests included, as the hourly run has them).
    dagster_run = timed_dagster_run(settings, new_hour)
    full = timed_dbt(full_settings, ["build", "--full-refresh", *MODELS_ONLY], target_path=full_target)
    volume = f"{args.orders_per_day:,} orders/day, {args.pings_per_day:,} pings/day, {report.rows:,} new bronze rows"
    print_report(incremental.run, full, new_hour, history_hours + 1, as_vars, previous.run, volume, dagster_run)
    return 0


def timed_dagster_run(settings: Settings, hour: datetime) -> float:
    """Seconds of ``dagster.materialize`` of the dbt assets for one arrival hour (in its day, tests included)."""
    assets = build_dbt_assets(settings)
    started = time.perf_counter()
    result = dg.materialize([assets], resources=build_resources(settings), tags=ArrivalWindow(hour, hour).run_tags())
    seconds = time.perf_counter() - started
    if not result.success:
        raise SystemExit("the Dagster run of the dbt assets failed; see its log above")
    return seconds


@dataclass
class TimedRun:
    """A dbt run with what these benchmarks print of it."""

    run: DbtRun
    launched: datetime  # naive UTC, as dbt's node timings

    @property
    def seconds(self) -> float:
        return self.run.seconds

    @property
    def timings(self) -> dict[str, float]:
        """Seconds per node (model name -> execution time)."""
        return {r["unique_id"].split(".")[-1]: float(r.get("execution_time") or 0.0) for r in self.run.results}

    @property
    def startup_seconds(self) -> float | None:
        """Seconds from launching dbt to its first node starting: interpreter, project, manifest, connection set-up."""
        starts = [datetime.fromisoformat(t["started_at"].rstrip("Z")) for r in self.run.results for t in r["timing"]]
        first = min(starts, default=None)
        return (first - self.launched).total_seconds() if first and first >= self.launched else None


def timed_dbt(settings: Settings, command: list[str], *args: Any, **kwargs: Any) -> TimedRun:
    """``run_dbt``, noting when dbt was launched."""
    launched = datetime.now(UTC).replace(tzinfo=None)
    return TimedRun(run_dbt(settings, command, *args, **kwargs), launched)


@dataclass
class TimedHour:
    run: TimedRun


def timed_hour(settings: Settings, window: dict[str, str], target: Path) -> TimedHour:
    """The new hour as the Dagster dbt step processes it: every model, the window in dbt's environment."""
    return TimedHour(timed_dbt(settings, ["build", *MODELS_ONLY], window=window, target_path=target))


def print_report(
    incremental: TimedRun,
    full: TimedRun,
    new_hour: datetime,
    hours: int,
    as_vars: TimedRun,
    previous: TimedRun,
    volume: str,
    dagster_seconds: float,
) -> None:
    inc_models = sum(incremental.timings.values())
    full_models = sum(full.timings.values())
    say("")
    say(f"one new arrival hour ({new_hour:%Y-%m-%d %H:00}) vs full refresh of {hours} arrival hours ({volume})")
    say(f"{'model':<34}{'new hour s':>12}{'full refresh s':>16}{'ratio':>9}")
    for name in sorted(full.timings, key=lambda n: -full.timings[n]):
        inc = incremental.timings.get(name, 0.0)
        ful = full.timings[name]
        say(f"{name:<34}{inc:>12.2f}{ful:>16.2f}{(inc / ful if ful else 0):>9.1%}")
    say(f"{'sum of model times':<34}{inc_models:>12.2f}{full_models:>16.2f}{inc_models / full_models:>9.1%}")
    say(
        f"{'dbt start-up (to the first node)':<34}{incremental.startup_seconds or 0:>12.2f}"
        f"{full.startup_seconds or 0:>16.2f}"
    )
    say(
        f"{'wall clock, DbtCliResource':<34}{incremental.seconds:>12.2f}{full.seconds:>16.2f}"
        f"{incremental.seconds / full.seconds:>9.1%}"
    )
    others = (
        ("same window as --vars (re-parse)", as_vars),
        ("hour before, 1st after full build", previous),
    )
    for label, run in others:
        say(
            f"{label:<34}{run.seconds:>12.2f}{'':>16}{run.seconds / full.seconds:>9.1%}"
            f"   (start-up {run.startup_seconds or 0:.2f}s, model sum {sum(run.timings.values()):.2f}s)"
        )
    dagster_ratio = dagster_seconds / full.seconds
    say(f"{'same window, Dagster run + tests':<34}{dagster_seconds:>12.2f}{'':>16}{dagster_ratio:>9.1%}")
    target = 0.05
    verdict = "meets" if incremental.seconds <= target * full.seconds else "misses"
    say(f"target: new hour <= {target:.0%} of the full refresh (wall clock, DbtCliResource): {verdict}")


if __name__ == "__main__":
    sys.exit(main())
