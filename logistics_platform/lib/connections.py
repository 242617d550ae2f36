"""Connections to the lakehouse: the pyiceberg SQL catalog and DuckDB with the Iceberg extensions.

The catalog is SQLite locally and PostgreSQL in prod; the warehouse is local files or S3 (``s3://bucket/prefix``).
DuckDB cannot download extensions here, so they are loaded from their PyPI packages; with an S3 warehouse DuckDB
also loads httpfs and gets a session secret built from the ``ICEBERG_S3_*`` settings.
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
S3_EXTENSIONS = ("httpfs",)
# The name of the DuckDB secret for the warehouse (temporary: it lives in the connection, never in a file).
S3_SECRET = "logistics_warehouse"
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


def on_s3(settings: Settings) -> bool:
    """Whether the warehouse is in S3-compatible object storage."""
    return settings.warehouse.startswith(("s3://", "s3a://", "s3n://"))


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def s3_secret_sql(settings: Settings) -> str:
    """``CREATE SECRET`` for DuckDB's httpfs from the ``ICEBERG_S3_*`` settings (path-style on a custom endpoint)."""
    from urllib.parse import urlsplit

    options = {"type": "s3"}
    for key, prop in (("key_id", "s3.access-key-id"), ("secret", "s3.secret-access-key"), ("region", "s3.region")):
        if settings.s3.get(prop):
            options[key] = settings.s3[prop]
    endpoint = settings.s3.get("s3.endpoint")
    if endpoint:
        # DuckDB takes host:port and the scheme as a flag; S3-compatible servers are addressed path-style
        # (bucket in the path), which needs no wildcard DNS name per bucket.
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint"] = parts.netloc
        options["url_style"] = "path"
        options["use_ssl"] = "true" if parts.scheme == "https" else "false"
    body = ", ".join(
        f"{key} {value}" if key in ("type", "use_ssl") else f"{key} {_quote(value)}" for key, value in options.items()
    )
    return f"create or replace temporary secret {S3_SECRET} ({body})"


def _load(con: duckdb.DuckDBPyConnection, name: str) -> None:
    try:
        con.execute(f"load {name}")
    except duckdb.Error:
        import_extension(name, con=con)
        con.execute(f"load {name}")


def load_extensions(con: duckdb.DuckDBPyConnection, settings: Settings | None = None) -> duckdb.DuckDBPyConnection:
    """Install (from the local wheel files) and load the extensions that ``iceberg_scan`` needs.

    With ``settings`` whose warehouse is on S3, also httpfs and the secret that reads the warehouse.
    """
    con.execute("set autoinstall_known_extensions = false")
    for name in EXTENSIONS:
        _load(con, name)
    if settings is not None and on_s3(settings):
        for name in S3_EXTENSIONS:
            _load(con, name)
        con.execute(s3_secret_sql(settings))
    return con


def connect(
    path: str | Path | None = None, read_only: bool = False, settings: Settings | None = None
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (in-memory when ``path`` is None) ready to read the Iceberg tables of ``settings``."""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:" if path is None else str(path), read_only=read_only)
    return load_extensions(con, settings)
