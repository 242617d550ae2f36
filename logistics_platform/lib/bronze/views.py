"""DuckDB views over the bronze Iceberg tables, bound to the metadata file the catalog points at now (run in every
dbt process: a SQLite catalog is read without pyiceberg)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from logistics_platform.lib.contract import EXTRA_PREFIX, SOURCES
from logistics_platform.settings import Settings

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import IcebergType

BRONZE_SCHEMA = "bronze"
OPS_SCHEMA = "ops"
FOLDED_WINDOWS_TABLE = f"{OPS_SCHEMA}.folded_windows"
# The bronze tables dbt reads, by name (bronze_tables() has their schemas; a test keeps the two equal).
BRONZE_TABLE_NAMES = (*SOURCES, "quarantine", "ingest_log")
SQLITE_PREFIX = "sqlite:///"
# The metadata file each table of a namespace points at, in pyiceberg's SQL catalog (read by SQLAlchemy, or by sqlite3).
_POINTERS = (
    "select table_name, metadata_location from iceberg_tables"
    " where catalog_name = :catalog and table_namespace = :namespace"
)
# Iceberg primitive type (as pyiceberg prints it) -> DuckDB type; the others have the same name in both
_DUCKDB_TYPES = {"string": "varchar", "long": "bigint", "int": "integer"}
_DUCKDB_TYPES |= {t: t for t in ("boolean", "double", "float", "timestamp", "timestamptz", "date")}


def bronze_tables() -> dict[str, Schema]:
    """Every bronze table dbt reads, with its contract schema (used when the table does not exist yet)."""
    from logistics_platform.lib.bronze import schema as bs

    tables = {name: bs.table_schema(spec) for name, spec in bs.TOPICS.items()}
    return {**tables, bs.QUARANTINE_TABLE: bs.quarantine_schema(), bs.INGEST_LOG_TABLE: bs.ingest_log_schema()}


def duckdb_type(t: IcebergType) -> str:
    """DuckDB type of an Iceberg primitive type."""
    if str(t).startswith("decimal("):
        return str(t).replace(" ", "")
    if str(t) not in _DUCKDB_TYPES:
        raise TypeError(f"no DuckDB type for Iceberg type {t}; extend _DUCKDB_TYPES in lib/bronze/views.py")
    return _DUCKDB_TYPES[str(t)]


def empty_select(schema: Schema) -> str:
    """A typed, zero-row select with the columns of ``schema`` (bronze before its first ingest)."""
    cols = ", ".join(f'cast(null as {duckdb_type(f.field_type)}) as "{f.name}"' for f in schema.fields)
    return f"select {cols} where false"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def current_metadata_locations(catalog: Catalog, namespace: str, names: Iterable[str]) -> dict[str, str | None]:
    """Table -> the metadata file the catalog points at now (None: no such table); one query for a SQL catalog."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchTableError
    from sqlalchemy import text

    names = list(names)
    if isinstance(catalog, SqlCatalog):
        with catalog.engine.connect() as con:
            rows = con.execute(text(_POINTERS), {"catalog": catalog.name, "namespace": namespace}).all()
        return _with_extra(rows, names)
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = catalog.load_table(f"{namespace}.{n}").metadata_location
        except NoSuchTableError:
            out[n] = None
    return out


def sqlite_metadata_locations(settings: Settings, namespace: str, names: Iterable[str]) -> dict[str, str | None]:
    """The same pointers read straight from a SQLite catalog file (read-only; a missing catalog has no tables)."""
    names = list(names)
    path = Path(settings.catalog_uri[len(SQLITE_PREFIX) :]).resolve()
    rows = []
    try:
        con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return dict.fromkeys(names)
    try:
        rows = con.execute(_POINTERS, {"catalog": settings.catalog_name, "namespace": namespace}).fetchall()
    except sqlite3.OperationalError as exc:  # a catalog that has not created its tables yet
        if "no such table" not in str(exc):
            raise
    finally:
        con.close()
    return _with_extra(rows, names)


def _with_extra(rows: Iterable[Any], names: list[str]) -> dict[str, str | None]:
    """Table of ``names`` -> its metadata file (None: none yet), and those of topics outside the contract (bronze),
    from the catalog's (table, metadata file) rows."""
    found = {str(name): str(location) for name, location in rows if location}
    return {n: found.get(n) for n in names} | {n: v for n, v in found.items() if n.startswith(EXTRA_PREFIX)}


def bronze_metadata_locations(settings: Settings) -> dict[str, str | None]:
    """Bronze table -> the metadata file the catalog points at now (None: the table does not exist yet)."""
    if settings.catalog_uri.startswith(SQLITE_PREFIX):
        return sqlite_metadata_locations(settings, BRONZE_SCHEMA, BRONZE_TABLE_NAMES)
    from logistics_platform.lib.connections import catalog_of

    return current_metadata_locations(catalog_of(settings), BRONZE_SCHEMA, BRONZE_TABLE_NAMES)


def refresh_bronze_views(con: duckdb.DuckDBPyConnection, settings: Settings) -> dict[str, str | None]:
    """(Re)create ``bronze.<table>`` for every bronze table; returns table -> metadata location (None: empty)."""
    locations = bronze_metadata_locations(settings)
    schemas = bronze_tables() if None in locations.values() else {}
    con.execute(f"create schema if not exists {BRONZE_SCHEMA}")
    for name, location in locations.items():
        body = empty_select(schemas[name]) if location is None else f"select * from iceberg_scan({_quote(location)})"
        con.execute(f"create or replace view {BRONZE_SCHEMA}.{name} as {body}")
    return locations


def ensure_ops_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Operator-owned tables that dbt reads as sources (late-event folds)."""
    con.execute(f"create schema if not exists {OPS_SCHEMA}")
    con.execute(
        f"create table if not exists {FOLDED_WINDOWS_TABLE} ("
        " topic varchar not null, window_start timestamp not null, folded_at timestamp not null,"
        " folded_by varchar, primary key (topic, window_start))"
    )
