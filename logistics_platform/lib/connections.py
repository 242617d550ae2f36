"""Connections to the lakehouse: the pyiceberg SQL catalog and DuckDB with the Iceberg extensions.

The catalog is SQLite locally and PostgreSQL in prod. DuckDB cannot download extensions here, so they are loaded
from their PyPI packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
from duckdb_extensions import import_extension

from logistics_platform.settings import Settings

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog

NAMESPACES = ("bronze", "marts")
EXTENSIONS = ("parquet", "avro", "iceberg")
# libpq waits for an unreachable host as long as the OS does; a catalog that is down should fail the command at once.
CONNECT_TIMEOUT_SECONDS = 5


def catalog_engine_uri(uri: str) -> str:
    """``uri`` with a libpq connect timeout for PostgreSQL (unless it sets its own); other databases unchanged."""
    from sqlalchemy.engine import make_url

    url = make_url(uri)
    if url.get_backend_name() != "postgresql" or "connect_timeout" in url.query:
        return uri
    return url.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT_SECONDS)}).render_as_string(
        hide_password=False
    )


def load_catalog(settings: Settings) -> SqlCatalog:
    """Open the SQL catalog, creating local directories and the namespaces on first use."""
    # Imported here: every dbt process imports this module (the plugin) and needs DuckDB, not pyiceberg.
    from pyiceberg.catalog.sql import SqlCatalog

    if settings.catalog_uri.startswith("sqlite:///"):
        Path(settings.catalog_uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    if settings.warehouse.startswith("file://"):
        Path(settings.warehouse[len("file://") :]).mkdir(parents=True, exist_ok=True)
    properties = settings.catalog_properties
    catalog = SqlCatalog(settings.catalog_name, **{**properties, "uri": catalog_engine_uri(properties["uri"])})
    for ns in NAMESPACES:
        catalog.create_namespace_if_not_exists(ns)
    return catalog


def load_extensions(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Install (from the local wheel files) and load the extensions that ``iceberg_scan`` needs."""
    con.execute("set autoinstall_known_extensions = false")
    for name in EXTENSIONS:
        try:
            con.execute(f"load {name}")
        except duckdb.Error:
            import_extension(name, con=con)
            con.execute(f"load {name}")
    return con


def connect(path: str | Path | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (in-memory when ``path`` is None) ready to read Iceberg tables."""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:" if path is None else str(path), read_only=read_only)
    return load_extensions(con)
