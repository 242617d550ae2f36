"""`logistics-platform run`: generated landing data through the platform's own Dagster jobs, every mart built."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.cli.render import render_progress, render_summary
from logistics_platform.defs.constants import INGEST_JOB, TRANSFORM_JOB
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze.landing import hour_dir
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.lib.timekeys import hour_key, hour_start
from logistics_platform.lib.transform.project import MART_MODELS, run_dbt
from logistics_platform.pipeline import (
    UNPARTITIONED_JOB,
    PipelineError,
    Progress,
    hour_ranges,
    run_pipeline,
)
from logistics_platform.settings import Settings, local_settings
from tests.conftest import EmbeddedRun
from tests.support.bronze import dump, write_file


def test_run_ingests_every_landed_hour_and_builds_every_mart(embedded_run: EmbeddedRun) -> None:
    summary, progress, bars = embedded_run.summary, embedded_run.log, embedded_run.progress
    assert summary.ok, render_summary(summary)
    assert summary.partitions == ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]
    jobs = [r.job for r in summary.runs]
    # ONE ranged ingest run over the consecutive hours, then ONE ranged transform run, then the rest.
    assert jobs == [INGEST_JOB, TRANSFORM_JOB, UNPARTITIONED_JOB]
    assert [r.partition for r in summary.runs[:2]] == ["2026-11-01-00:00..2026-11-01-02:00"] * 2
    assert set(summary.marts) == set(MART_MODELS)
    assert summary.marts["fct_orders"] > 0 and summary.bronze["orders"] > summary.marts["fct_orders"]
    assert len(progress) == 2 and all(line.endswith("ok") for line in progress)
    assert [(b.hours_done, b.stage) for b in bars] == [(0, "ingest"), (3, "ingest"), (3, "transforming")]
    assert bars[1].lines > summary.bronze["orders"] and bars[2].lines == bars[1].lines
    rendered = render_summary(summary)
    assert "runs: 3 (0 failed)" in rendered and "marts.fct_orders" in rendered


def test_hour_ranges_cut_consecutive_hours_into_runs() -> None:
    keys = ["2026-11-01-03:00", "2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00", "2026-11-01-05:00"]
    assert hour_ranges(keys, 24) == [
        ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00", "2026-11-01-03:00"],
        ["2026-11-01-05:00"],  # a gap starts a new run
    ]
    assert hour_ranges([*keys, "2026-11-01-00:00"], 3) == [
        ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"],
        ["2026-11-01-03:00"],
        ["2026-11-01-05:00"],
    ]
    day = [f"2026-11-{d:02d}-{h:02d}:00" for d in (1, 2) for h in range(24)]
    assert [len(r) for r in hour_ranges(day, 24)] == [24, 24]


def test_progress_line_shows_hours_lines_rate_and_eta() -> None:
    line = render_progress(Progress(hours_done=6, hours_total=24, lines=12_000, elapsed_seconds=3.0), width=8)
    assert line == "[##......] 6/24 hours, 12,000 lines, 4,000 lines/s, ETA 9s"
    assert render_progress(Progress(24, 24, 48_000, 12.0, "transforming"), width=4).endswith("transforming")


def test_run_refuses_bad_partition_keys_and_a_missing_landing_zone(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    with pytest.raises(PipelineError, match="run `logistics-platform generate`"):
        run_pipeline(settings)
    generate(settings.landing_dir, GeneratorConfig.clean(datetime(2026, 11, 1), hours=2, seed=3, orders_per_day=50))
    with pytest.raises(PipelineError, match="keys look like 2026-11-01-13:00"):
        run_pipeline(settings, ["2026-11-01 01:00"])
    # Validation comes before any run: nothing was ingested.
    assert not (tmp_path / "warehouse" / "catalog.db").exists()


ORDERS = "oltp.public.orders"
NO_TESTS = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]


def _copy_hour(settings: Settings, source: str, target: str) -> None:
    """The orders files of hour folder ``source`` again under ``target`` (a folder path below the landing root)."""
    folder = settings.landing_dir / target
    folder.mkdir(parents=True)
    for path in (settings.landing_dir / source).iterdir():
        shutil.copyfile(path, folder / path.name)


@pytest.mark.slow
def test_run_takes_the_hour_in_progress_and_reports_the_hours_it_cannot_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real time: the last generated hour is the one in progress, as a live sink (or `capture`) writes it.
    now = datetime.now(UTC)
    first = hour_start(now) - timedelta(hours=2)
    settings = local_settings(tmp_path, partitions_start=hour_key(first))
    config = GeneratorConfig.clean(first, hours=3, seed=5, orders_per_day=240, pings_per_day=480)
    generate(settings.landing_dir, config)
    landed = [hour_key(first + timedelta(hours=i)) for i in range(3)]
    open_hour = hour_start(first + timedelta(hours=2))
    # What `run` cannot take: an hour before PARTITIONS_START, one ahead of the clock, a folder that is no hour.
    source = hour_dir(ORDERS, open_hour)
    _copy_hour(settings, source, hour_dir(ORDERS, first - timedelta(hours=1)))
    _copy_hour(settings, source, hour_dir(ORDERS, open_hour + timedelta(hours=3)))
    _copy_hour(settings, source, f"topics/{ORDERS}/dt=2026-13-01/hr=00")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)

    summary = run_pipeline(settings)

    assert summary.ok, render_summary(summary)
    assert summary.partitions == landed
    before, ahead = hour_key(first - timedelta(hours=1)), hour_key(open_hour + timedelta(hours=3))
    malformed = f"topics/{ORDERS}/dt=2026-13-01"
    assert set(summary.skipped) == {before, ahead, malformed}
    assert summary.skipped[before] == f"before PARTITIONS_START={hour_key(first)}"
    assert summary.skipped[ahead].startswith("after the hour in progress")
    assert summary.skipped[malformed] == "2026-13-01 is not a date"
    assert [r.job for r in summary.runs] == [INGEST_JOB, TRANSFORM_JOB, UNPARTITIONED_JOB]
    assert [r.partition for r in summary.runs[:2]] == [f"{landed[0]}..{landed[-1]}"] * 2
    # The open hour is in bronze, accounted for like any other, and the marts are built from it.
    logged = read_ingest_log(load_catalog(settings))
    assert {hour for _, hour in logged} == set(landed) and all(e.balanced for e in logged.values())
    assert summary.marts["fct_orders"] > 0
    rendered = render_summary(summary)
    assert "left out: 3 (not ingested)" in rendered and "2026-13-01 is not a date" in rendered


def _same_marts(built: Path, full: Path) -> None:
    """Every mart of the DuckDB file ``built`` holds the rows of ``full``'s, as multisets."""
    con = connect()
    con.execute(f"attach '{built}' as built (read_only)")
    con.execute(f"attach '{full}' as full_build (read_only)")
    for mart in MART_MODELS:
        a, b = f"select * from built.marts.{mart}", f"select * from full_build.marts.{mart}"
        only = con.sql(f"({a} except all {b}) union all ({b} except all {a})").fetchall()
        assert not only, f"{mart}: rows in one build only: {only[:3]}"
    con.close()


@pytest.mark.slow
def test_a_new_file_in_one_hour_takes_one_ingest_run_and_the_marts_equal_a_full_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    settings = local_settings(tmp_path / "live", dagster_home=home)
    start = datetime(2026, 11, 1)
    generate(settings.landing_dir, GeneratorConfig.clean(start, hours=30, seed=7, orders_per_day=120))
    first = run_pipeline(settings)
    assert first.ok, render_summary(first)
    assert len(first.partitions) == 30 and first.up_to_date == []

    # One delayed file lands in an hour of the first day.
    hour = start + timedelta(hours=5)
    landed = sorted((settings.landing_dir / hour_dir(ORDERS, hour)).iterdir())[0]
    event = json.loads(landed.read_text().splitlines()[0])
    event["after"]["order_id"] = 10**6  # a new order, otherwise as the generator writes them
    write_file(settings.landing_dir, ORDERS, hour, 9, 0, [dump(event)])
    instance = dg.DagsterInstance.get()
    ingest_runs = len(instance.get_runs(dg.RunsFilter(job_name=INGEST_JOB)))
    second = run_pipeline(settings)

    assert second.ok, render_summary(second)
    assert second.partitions == [hour_key(hour)] and len(second.up_to_date) == 29
    runs = instance.get_runs(dg.RunsFilter(job_name=INGEST_JOB))  # newest first
    assert len(runs) == ingest_runs + 1 and runs[0].tags.get("dagster/partition") == hour_key(hour)
    assert "up to date: 29" in render_summary(second)
    # `--full` still takes every landed hour (the ingest finds them unchanged).
    swept = run_pipeline(settings, full=True)
    assert swept.ok and swept.partitions == first.partitions and swept.up_to_date == []
    assert len(instance.get_runs(dg.RunsFilter(job_name=INGEST_JOB))) == ingest_runs + 1 + 2  # 24 + 6 hours

    # The marts the runs left equal a full refresh of the same bronze tables.
    full = settings.with_overrides(duckdb_path=tmp_path / "full.duckdb")
    run_dbt(full, ["build", "--full-refresh", *NO_TESTS], target_path=tmp_path / "target_full")
    _same_marts(settings.duckdb_path, full.duckdb_path)
