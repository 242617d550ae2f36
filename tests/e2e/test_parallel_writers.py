"""Parallel writers in the prod profile: four arrival hours ingested at the same time, each in its own process
(as Dagster's multiprocess executor or four runs would), and a range backfill beside hourly runs (one of them of an
hour inside the range), into the same bronze tables on the PostgreSQL catalog, with the warehouse on the moto S3
server.

How they all land: pyiceberg's SQL catalog commits optimistically (one UPDATE of the table's row in
``iceberg_tables`` guarded by the metadata location the writer started from); a writer that lost the race gets
``CommitFailedException``, reloads the table and re-applies its hour's replace on the fresh metadata
(``lib/bronze/commit.py``). Nothing serializes them but that row; the `duckdb` pool serializes only the DuckDB file.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from threading import Barrier
from typing import Any

import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.ingest import ingest_hour, ingest_hours
from logistics_platform.lib.bronze.reports import IngestReport
from logistics_platform.lib.connections import load_catalog
from logistics_platform.settings import Settings, local_settings
from tests.conftest import S3Warehouse
from tests.support.processes import run_lined_up
from tests.support.prod import prod_settings

pytestmark = [pytest.mark.postgres, pytest.mark.s3]

START = datetime(2026, 11, 4, 6)
HOURS = 4
LINED_UP = f"{bs.NAMESPACE}.orders"
WRITER_DEADLINE_S = 600  # an upper bound of the wait, not a measurement


def _line_up(barrier: Barrier, identifier: str) -> None:
    # Every writer has loaded the same metadata of bronze.orders: only one of their first commits can win.
    if identifier == LINED_UP:
        barrier.wait(timeout=300)


def _ingest(settings: Settings, hours: list[datetime], barrier: Barrier, reports: Any, name: str) -> None:
    # One commit per table for all of ``hours``: a single hour is an hourly run, several a range backfill's run.
    reports[name] = ingest_hours(settings, hours, before_commit=partial(_line_up, barrier))


def _write_at_once(settings: Settings, runs: dict[str, list[datetime]]) -> dict[str, list[IngestReport]]:
    """Each run in its own process, all lined up on the same bronze.orders metadata; their reports by run name."""
    # The catalog's own tables exist before the writers start, as `logistics-platform setup` makes them before a
    # deployment's first run.
    load_catalog(settings)
    outcome = run_lined_up(_ingest, {name: (settings, hours) for name, hours in runs.items()}, WRITER_DEADLINE_S)
    assert all(code == 0 for code in outcome.exit_codes.values()), outcome.exit_codes
    return {name: list(outcome.results[name]) for name in runs}


def _assert_as_one_writer(tmp_path: Path, parallel_settings: Settings, landing: Path, hours: list[datetime]) -> None:
    """Nothing lost, nothing duplicated: the same rows as one writer ingesting ``hours`` one after another."""
    one_writer = local_settings(tmp_path / "sequential", landing_dir=landing)
    for h in hours:
        ingest_hour(one_writer, h)
    parallel, sequential = _rows(parallel_settings), _rows(one_writer)
    for name, rows in parallel.items():
        assert rows == sequential[name], f"bronze.{name}: parallel writers differ from one writer"
        addresses = [row[:3] for row in rows]
        assert len(addresses) == len(set(addresses)), f"bronze.{name} holds a row twice"
    assert {row[-1] for row in parallel["orders"]} == set(hours)


def _rows(settings: Settings) -> dict[str, list[tuple]]:
    """Every bronze row's address (topic, Kafka partition, offset, file, arrival hour), sorted."""
    catalog = load_catalog(settings)
    cols = ("_topic", "_kafka_partition", "_offset", "_source_file", "_arrival_hour")
    return {
        name: sorted(
            tuple(r.values())
            for r in catalog.load_table(f"{bs.NAMESPACE}.{name}").scan(selected_fields=cols).to_arrow().to_pylist()
        )
        for name in [*bs.TOPICS, bs.QUARANTINE_TABLE]
    }


def test_four_hours_written_at_once_all_land_once(tmp_path: Path, pg_database: str, s3_warehouse: S3Warehouse) -> None:
    landing = tmp_path / "landing"
    generate(landing, GeneratorConfig(start=START, hours=HOURS, seed=23, orders_per_day=1500, pings_per_day=6000))
    hours = [START + timedelta(hours=h) for h in range(HOURS)]
    prod = prod_settings(tmp_path / "prod", landing, pg_database, **s3_warehouse.env)
    assert prod.env == "prod" and prod.catalog_uri.startswith("postgresql") and prod.warehouse.startswith("s3://")

    by_run = _write_at_once(prod, {h.isoformat(): [h] for h in hours})
    reports = [by_run[h.isoformat()][0] for h in hours]

    # The race was real: three of the four first commits on bronze.orders lost and were retried.
    attempts = [r.topics["orders"].commit_attempts for r in reports]
    assert sorted(attempts)[0] == 1 and all(a >= 2 for a in sorted(attempts)[1:]), attempts

    _assert_as_one_writer(tmp_path, prod, landing, hours)
    assert sum(len(v) for v in _rows(prod).values()) == sum(r.rows + r.quarantined for r in reports)

    # Every hour's commit is its own snapshot, and the ingest log (written last) names all four hours.
    catalog = load_catalog(prod)
    orders = catalog.load_table(LINED_UP)
    assert orders.location().startswith(f"s3://{s3_warehouse.bucket}/")
    committed = {r.topics["orders"].snapshot_id for r in reports}
    assert committed <= {s.snapshot_id for s in orders.snapshots()}
    assert len(committed) == HOURS
    logged = catalog.load_table(f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}").scan().to_arrow()
    assert sorted(set(logged.column("arrival_hour").to_pylist())) == hours


def test_a_range_backfill_beside_hourly_runs_all_land_once(
    tmp_path: Path, pg_database: str, s3_warehouse: S3Warehouse
) -> None:
    landing = tmp_path / "landing"
    generate(landing, GeneratorConfig(start=START, hours=5, seed=29, orders_per_day=1500, pings_per_day=6000))
    hours = [START + timedelta(hours=h) for h in range(5)]
    prod = prod_settings(tmp_path / "prod", landing, pg_database, **s3_warehouse.env)
    # A backfill's run of four hours, an hourly run of the hour after them, and an hourly re-run of an hour the
    # backfill also takes (a late upload's re-ingest racing the backfill): the same hour replaced by two writers.
    by_run = _write_at_once(prod, {"backfill": hours[:4], "hourly": [hours[4]], "rerun": [hours[2]]})
    attempts = sorted(r.topics["orders"].commit_attempts for reports in by_run.values() for r in reports[:1])
    assert attempts[0] == 1 and all(a >= 2 for a in attempts[1:]), attempts
    _assert_as_one_writer(tmp_path, prod, landing, hours)
    # The backfill's hours share its one commit per table.
    assert len({r.topics["orders"].snapshot_id for r in by_run["backfill"]}) == 1
