"""The production catalog: the same ingest on a PostgreSQL SQL catalog (JDBC-catalog schema, named catalog).

`make test` starts the local PostgreSQL server when it is down; this test needs it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

import psycopg2
import pytest
from sqlalchemy.engine import make_url

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import CONNECT_TIMEOUT_SECONDS, catalog_engine_uri, connect, load_catalog
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.settings import Settings, SettingsError, load_settings, local_settings

pytestmark = pytest.mark.postgres

START = datetime(2026, 11, 3)
HOURS = 3


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
    assert [r.partition_key for r in reports] == [hour_key(h) for h in hours]

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


JDBC_COLUMNS = {
    # The tables and columns Iceberg's JdbcCatalog (Spark, Trino, Flink) reads and writes.
    "iceberg_tables": {
        "catalog_name",
        "table_namespace",
        "table_name",
        "metadata_location",
        "previous_metadata_location",
    },
    "iceberg_namespace_properties": {"catalog_name", "namespace", "property_key", "property_value"},
}


def _pg(uri: str) -> psycopg2.extensions.connection:
    url = make_url(uri)
    return psycopg2.connect(host=url.host, port=url.port, user=url.username, dbname=url.database)


def test_the_catalog_is_the_jdbc_schema_under_its_configured_name(tmp_path: Path, pg_database: str) -> None:
    landing = tmp_path / "landing"
    generate(landing, GeneratorConfig(start=START, hours=1, seed=5, orders_per_day=240, pings_per_day=600))
    env = {
        "LOGISTICS_ENV": "prod",
        "ICEBERG_CATALOG_URI": pg_database,
        "ICEBERG_WAREHOUSE": f"file://{tmp_path / 'warehouse'}",
        "LANDING_DIR": str(landing),
        "ICEBERG_CATALOG_NAME": "fleet_prod",
    }
    settings = load_settings(env)
    assert settings.catalog_name == "fleet_prod"
    assert load_settings({**env, "ICEBERG_CATALOG_NAME": ""}).catalog_name == "logistics"
    ingest_hour(settings, START)
    orders = load_catalog(settings).load_table("bronze.orders")

    with _pg(pg_database) as conn, conn.cursor() as cur:
        for table, columns in JDBC_COLUMNS.items():
            cur.execute("select column_name from information_schema.columns where table_name = %s", (table,))
            assert columns <= {r[0] for r in cur.fetchall()}, table
        # What a JDBC reader configured with the same name runs to find the table's current metadata.
        cur.execute(
            "select metadata_location from iceberg_tables "
            "where catalog_name = %s and table_namespace = %s and table_name = %s",
            ("fleet_prod", "bronze", "orders"),
        )
        assert cur.fetchall() == [(orders.metadata_location,)]
        cur.execute(
            "select distinct catalog_name from iceberg_tables union select catalog_name from "
            "iceberg_namespace_properties"
        )
        assert {r[0] for r in cur.fetchall()} == {"fleet_prod"}

    # Readers filter by the name: under another name the same database holds no tables.
    other = load_catalog(settings.with_overrides(catalog_name="logistics"))
    assert other.list_tables("bronze") == []
    assert ("bronze", "orders") in load_catalog(settings).list_tables("bronze")


@pytest.mark.parametrize("name", ["fleet-prod", "1st", "a.b"])
def test_a_catalog_name_that_engines_cannot_configure_is_refused(name: str) -> None:
    with pytest.raises(SettingsError, match="ICEBERG_CATALOG_NAME"):
        load_settings({"ICEBERG_CATALOG_NAME": name})


def test_the_catalog_connection_waits_a_bounded_time_for_the_server(tmp_path: Path, pg_database: str) -> None:
    # An unreachable host would otherwise hold a command for the OS's TCP timeout before it can say so.
    catalog = load_catalog(local_settings(tmp_path, catalog_uri=pg_database))
    assert catalog.engine.url.query["connect_timeout"] == str(CONNECT_TIMEOUT_SECONDS)
    assert catalog.list_namespaces()  # the option is one libpq accepts
    own = "postgresql+psycopg2://u:p%40ss@db.internal:5432/iceberg?connect_timeout=2"
    assert catalog_engine_uri(own) == own
    assert make_url(catalog_engine_uri(own.replace("?connect_timeout=2", ""))).password == "p@ss"
    assert catalog_engine_uri("sqlite:////tmp/catalog.db") == "sqlite:////tmp/catalog.db"
