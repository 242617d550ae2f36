"""Invariant 3 of marts.md: arrival hours processed one by one and in ranges, out of order and re-run, with the open
hour processed in micro-batches as its files land, equal a full refresh."""

from __future__ import annotations

import random
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import LandingFile, list_arrival_hours, list_hour_files
from logistics_platform.lib.bronze.schema import TOPICS
from logistics_platform.lib.timekeys import hour_start
from logistics_platform.lib.transform.project import MART_MODELS, run_dbt, window_vars
from logistics_platform.settings import local_settings
from tests.support.ops_world import DAY_HOURS, build_ops_world
from tests.support.transform_world import write_landing

pytestmark = pytest.mark.slow
# Steps of the shuffled schedule build models and seeds only; the final full refresh runs every test.
NO_TESTS = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]


OPERATIONS_MARTS = ("fct_region_sla", "fct_region_delivery_daily", "fct_courier_gps_jumps")
STAGING_MODELS = ("stg_orders", "stg_payments", "stg_tenants", "stg_couriers", "stg_tracking_pings")


def _compare(left: Path, right: Path, relations: list[str], columns: str = "*") -> dict[str, int]:
    """Relation -> row count; fails on any row in one database and not the other (both EXCEPT directions)."""
    con = duck.connect()
    con.execute(f"attach '{left}' as incremental (read_only)")
    con.execute(f"attach '{right}' as rebuilt (read_only)")
    counts = {}
    for relation in relations:
        a, b = f"select {columns} from incremental.{relation}", f"select {columns} from rebuilt.{relation}"
        only_incremental = con.sql(f"{a} except all {b}").fetchall()
        only_rebuilt = con.sql(f"{b} except all {a}").fetchall()
        assert not only_incremental, f"{relation}: rows only in the incremental build: {only_incremental[:5]}"
        assert not only_rebuilt, f"{relation}: rows only in the full refresh: {only_rebuilt[:5]}"
        counts[relation] = con.sql(f"select count(*) from rebuilt.{relation}").fetchone()[0]
    return counts


def _staged_by(duckdb_path: Path) -> set[tuple[str, str, str]]:
    """(model, _event_id, _staged_by) of every staged row."""
    con = duck.connect(duckdb_path, read_only=True)
    try:
        rows = set()
        for model in STAGING_MODELS:
            rows |= {(model, e, s) for e, s in con.sql(f"select _event_id, _staged_by from staging.{model}").fetchall()}
        return rows
    finally:
        con.close()


def test_operations_marts_shuffled_hours_with_reruns_equal_full_refresh(tmp_path: Path) -> None:
    """The operations world (a breach, overdue and deleted-while-overdue orders, an anomalous day, GPS jumps) over 5
    days: its days' arrival hours as ranges in a seeded random order, a few single hours, some re-run, a range across a
    day boundary, equal a full refresh."""
    settings = local_settings(tmp_path / "incremental")
    world = build_ops_world()
    write_landing(world, settings.landing_dir)
    hours = world.hours
    # Each day's consecutive arrival hours (a range is one dbt run, as a backfill or `run` makes it); the first day
    # goes in single hours and a pair, so single hours and ranges meet in one build.
    per_day = len(DAY_HOURS)
    days = [(i, i + per_day - 1) for i in range(0, len(hours), per_day)]
    random.Random(5).shuffle(days)
    first = days[0][0]
    steps = [(first, first), (first + 1, first + 1), (first + 2, days[0][1]), *days[1:]]
    steps[3:3] = [steps[0]]  # re-run after later hours were done
    steps.insert(6, steps[5])  # re-run right away
    steps.append((per_day - 1, per_day))  # a range over a day boundary (13:00 then 10:00 the next day), done before
    assert {i for a, b in steps for i in range(a, b + 1)} == set(range(len(hours)))
    target = tmp_path / "target"
    for first, last in steps:
        for hour in hours[first : last + 1]:
            ingest_hour(settings, hour)
        run_dbt(settings, ["build", *NO_TESTS], window=window_vars(hours[first], hours[last]), target_path=target)

    rebuilt = settings.with_overrides(duckdb_path=tmp_path / "rebuilt.duckdb")
    run_dbt(rebuilt, ["build", "--full-refresh", *NO_TESTS], target_path=tmp_path / "target_full")
    marts = [f"marts.{mart}" for mart in OPERATIONS_MARTS]
    counts = _compare(settings.duckdb_path, rebuilt.duckdb_path, marts)
    assert all(counts[m] > 0 for m in marts), counts
    con = duck.connect(rebuilt.duckdb_path, read_only=True)
    try:
        assert con.sql("select count(*) from marts.fct_region_sla where breached").fetchone() == (1,)
        assert con.sql("select count(*) from marts.fct_region_delivery_daily where is_anomaly").fetchone() == (1,)
    finally:
        con.close()


def _land(files: list[LandingFile], source: Path, landing: Path) -> None:
    for f in files:
        (landing / f.relpath).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / f.relpath, landing / f.relpath)


def test_hours_and_micro_batches_in_any_order_with_reruns_equal_full_refresh(tmp_path: Path) -> None:
    """Generated hours ending in the current (open) hour, on the real clock, with the generator's anomalies
    (duplicates, out-of-order, late, deletes, invalid lines, the tip_amount column appearing mid-way): the closed
    hours out of order, one pair as a range (one dbt run, as a backfill or `run` makes it), one re-run after later
    hours; the open hour's files landed in shuffled batches between them, each batch ingested (an append of its new
    files) and built with the open hour as the window, one batch re-run right away with nothing new. The result equals
    a full refresh, which runs every data test of the project."""
    open_hour = hour_start(datetime.now(UTC))
    source = tmp_path / "generated"
    config = GeneratorConfig(
        start=open_hour - timedelta(hours=4), hours=5, seed=3, orders_per_day=1500, pings_per_day=6000, flush_size=40
    )
    generate(source, replace(config, late_beyond_rate=0.04, out_of_order_rate=0.05))
    hours = list_arrival_hours(source)
    assert hours[-1] == open_hour and len(hours) == 5
    settings = local_settings(tmp_path / "incremental")
    files = [f for spec in TOPICS.values() for f in list_hour_files(source, spec.topic, open_hour)]
    rng = random.Random(11)
    rng.shuffle(files)
    batches = [files[i::3] for i in range(3)]

    def closed(*picked: int) -> list[LandingFile]:
        return [f for i in picked for s in TOPICS.values() for f in list_hour_files(source, s.topic, hours[i])]

    # (what lands, the first and last hour ingested and built as one window): the open hour's batches between the
    # closed hours, the second batch re-run with nothing new, hour 2 re-run after later hours were done.
    steps: list[tuple[list[LandingFile], datetime, datetime]] = [
        (closed(2), hours[2], hours[2]),  # the first build: nothing exists yet
        (batches[0], open_hour, open_hour),
        (closed(0, 1), hours[0], hours[1]),
        (batches[1], open_hour, open_hour),
        ([], open_hour, open_hour),
        (closed(3), hours[3], hours[3]),
        (batches[2], open_hour, open_hour),
        ([], hours[2], hours[2]),
    ]
    modes, staged = [], []
    target = tmp_path / "target"
    for n, (landed, first, last) in enumerate(steps):
        _land(landed, source, settings.landing_dir)
        for hour in hours[hours.index(first) : hours.index(last) + 1]:
            report = ingest_hour(settings, hour)
            if hour == open_hour:
                modes.append(report.mode)
        window = window_vars(first, last)
        if n == 2:
            # The window as dbt vars on the dbt CLI (the documented interface for running dbt by hand) ...
            run_dbt(settings, ["build", *NO_TESTS], window, target_path=target)
        else:
            # ... and as the Dagster assets pass it: in the environment, read by the macros at execution only.
            run_dbt(settings, ["build", *NO_TESTS], window=window, target_path=target)
        if n in (3, 4):
            staged.append(_staged_by(settings.duckdb_path))
    assert modes == ["replace", "append", "unchanged", "append"]
    # Re-running the open hour right away changed no staged row, so it rewrote none (event_merge skips unchanged rows).
    assert staged[0] == staged[1] and len(staged[0]) > 100

    rebuilt = settings.with_overrides(duckdb_path=tmp_path / "rebuilt.duckdb")
    # Raises with the failing nodes if any model or test fails.
    result = run_dbt(rebuilt, ["build", "--full-refresh"], target_path=tmp_path / "target_full")
    tests_run = [r for r in result.results if r["unique_id"].startswith("test.")]
    failed = [r["unique_id"] for r in tests_run if r["status"] in ("fail", "error")]
    assert result.ok and len(tests_run) > 50 and not failed, failed
    counts = _compare(settings.duckdb_path, rebuilt.duckdb_path, [f"marts.{mart}" for mart in MART_MODELS])
    # Staging by column name, all columns but _staged_by (the run that last changed a row): a column that appeared
    # mid-way (tip_amount) was added at the end of the staging table built before it, and in place by the full refresh.
    for model in STAGING_MODELS:
        columns = ", ".join(c for c in _columns(rebuilt.duckdb_path, "staging", model) if c != '"_staged_by"')
        _compare(settings.duckdb_path, rebuilt.duckdb_path, [f"staging.{model}"], columns=columns)
    for mart in MART_MODELS:
        assert counts[f"marts.{mart}"] > 0, f"{mart} is empty: the data set does not exercise it"


def _columns(duckdb_path: Path, schema: str, relation: str) -> list[str]:
    """The relation's column names, in table order, quoted."""
    con = duck.connect(duckdb_path, read_only=True)
    try:
        rows = con.execute(
            "select column_name from information_schema.columns where table_schema = ? and table_name = ? "
            "order by ordinal_position",
            [schema, relation],
        ).fetchall()
    finally:
        con.close()
    return [f'"{name}"' for (name,) in rows]
