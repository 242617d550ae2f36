"""The production catalog: the same ingest on a PostgreSQL SQL catalog, with parallel writers.

`make test` starts the local PostgreSQL server when it is down; this test needs it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import psycopg2
import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.settings import Settings, local_settings

pytestmark = pytest.mark.postgres

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "dbname": "postgres"}
START = datetime(2026, 11, 3)
HOURS = 3


@pytest.fixture()
def pg_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    name = f"logistics_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg2.connect(**PG, connect_timeout=5)
    except psycopg2.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable on 127.0.0.1:5432 ({exc}); `make test` starts it: run it that way")
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'create database "{name}"')
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f'drop database if exists "{name}" with (force)')
        admin.close()


def _contents(settings: Settings) -> dict[str, list[tuple]]:
    """Every bronze table's rows (address + identity + event time), sorted: comparable across catalogs."""
    catalog = load_catalog(settings)
    out = {}
    for name in [*bs.TOPICS, bs.QUARANTINE_TABLE]:
        t = catalog.load_table(f"bronze.{name}").scan(
            selected_fields=("_topic", "_kafka_partition", "_offset", "_source_file", "_arrival_hour")
        )
        out[name] = sorted(tuple(r.values()) for r in t.to_arrow().to_pylist())
    return out


def test_parallel_ingest_on_postgres_equals_sqlite(tmp_path: Path, pg_database: str) -> None:
    landing = tmp_path / "landing"
    generate(landing, GeneratorConfig(start=START, hours=HOURS, seed=11, orders_per_day=1200, pings_per_day=6000))
    hours = [START + timedelta(hours=h) for h in range(HOURS)]

    pg = local_settings(tmp_path / "pg", landing_dir=landing, catalog_uri=pg_database)
    # Parallel writers on every table at once: the catalog's optimistic commit + our retry must land all hours.
    load_catalog(pg)
    with ThreadPoolExecutor(max_workers=len(hours)) as pool:
        reports = list(pool.map(lambda h: ingest_hour(pg, h), hours))
    assert [r.partition_key for r in reports] == [h.strftime("%Y-%m-%d-%H:%M") for h in hours]

    lite = local_settings(tmp_path / "lite", landing_dir=landing)
    for h in hours:
        ingest_hour(lite, h)

    pg_rows, lite_rows = _contents(pg), _contents(lite)
    for name in pg_rows:
        assert pg_rows[name] == lite_rows[name], f"bronze.{name} differs between PostgreSQL and SQLite catalogs"
    assert sum(len(v) for v in pg_rows.values()) == sum(r.rows + r.quarantined for r in reports)
    arrival_hours = {row[-1] for row in pg_rows["orders"]}
    assert arrival_hours == set(hours)

    # A second engine reads the PostgreSQL-cataloged table through the metadata the catalog points at.
    table = load_catalog(pg).load_table("bronze.orders")
    con = connect()
    n = con.execute(f"select count(*) from iceberg_scan('{table.metadata_location}')").fetchone()[0]
    assert n == len(pg_rows["orders"])
