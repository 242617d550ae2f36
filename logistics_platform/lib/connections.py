"""Connections to the lakehouse: the pyiceberg SQL catalog and DuckDB with the Iceberg extensions (core.md)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

import duckdb
from duckdb_extensions import import_extension

from logistics_platform.settings import Settings

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.catalog.sql import SqlCatalog

NAMESPACES = ("bronze", "marts")
EXTENSIONS = ("parquet", "avro", "iceberg")
# The name of the DuckDB secret for the warehouse (temporary: it lives in the connection, never in a file).
S3_SECRET = "logistics_warehouse"
QUOTE = "'"
# libpq waits for an unreachable host as long as the OS does; a catalog that is down should fail the command at once.
CONNECT_TIMEOUT_SECONDS = 5
# What a driver says when the catalog database cannot be reached.
UNREACHABLE = (
    "connection refused",
    "could not connect",
    "timeout expired",
    "could not translate host name",
    "name or service not known",
    "no route to host",
    "network is unreachable",
    "unable to open database file",
)
# Opening the catalog again after losing the race to create its tables (docs/internals/core.md).
CREATION_ATTEMPTS = 3


def catalog_engine_uri(uri: str) -> str:
    """``uri`` with a libpq connect timeout for PostgreSQL (unless it sets its own); other databases unchanged."""
    from sqlalchemy.engine import make_url

    url = make_url(uri)
    if url.get_backend_name() != "postgresql" or "connect_timeout" in url.query:
        return uri
    url = url.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT_SECONDS)})
    return url.render_as_string(hide_password=False)


class MisconfiguredError(RuntimeError):
    """The catalog or the warehouse cannot be used as configured (retrying cannot help); names the setting to fix."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


def redacted(uri: str) -> str:
    """``uri`` with its password masked (for messages)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(uri).render_as_string(hide_password=True)
    except Exception:
        return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", uri)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def catalog_misconfiguration(settings: Settings, exc: BaseException) -> MisconfiguredError | None:
    """What ``exc`` (a failed connection to the catalog database) says is wrong with ICEBERG_CATALOG_URI, if it does."""
    cause = getattr(exc, "orig", None) or exc
    text = _one_line(str(cause).replace("FATAL:", ""))
    low = text.lower()
    where = redacted(settings.catalog_uri)
    login = ("password authentication failed", "no pg_hba.conf entry")
    if any(w in low for w in login) or ("role" in low and "does not exist" in low):
        problem, fix = f"the Iceberg catalog at {where} refused the login", "fix the user or password in"
    elif "database" in low and "does not exist" in low:
        problem, fix = f"the Iceberg catalog database at {where} does not exist", "create it, or fix its name in"
    elif any(w in low for w in UNREACHABLE):
        problem, fix = f"cannot reach the Iceberg catalog at {where}", "start the database, or fix the host and port in"
    else:
        return None
    return MisconfiguredError(f"{problem} ({text}): {fix} ICEBERG_CATALOG_URI", "ICEBERG_CATALOG_URI")


def _check_catalog(settings: Settings) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy import exc as sa_exc
    from sqlalchemy.pool import NullPool

    if settings.catalog_uri.startswith("sqlite"):
        return  # a local file that load_catalog creates: nothing to reach
    engine = create_engine(catalog_engine_uri(settings.catalog_uri), poolclass=NullPool)
    try:
        with engine.connect() as con:
            con.execute(text("select 1"))
    except sa_exc.DBAPIError as exc:
        problem = catalog_misconfiguration(settings, exc)
        if problem is not None:
            raise problem from None
        raise
    finally:
        engine.dispose()


def s3_endpoint(settings: Settings) -> SplitResult | None:
    """``ICEBERG_S3_ENDPOINT`` split into scheme and host:port (https when it names no scheme); None when unset."""
    endpoint = settings.s3_endpoint
    return urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}") if endpoint else None


def s3_filesystem(settings: Settings) -> Any:
    """A pyarrow S3FileSystem on the warehouse's endpoint with the settings' credentials and short timeouts."""
    from pyarrow import fs as pafs

    options: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "request_timeout": CONNECT_TIMEOUT_SECONDS,
        # One attempt: the pre-flight check says what is wrong now; the SDK's retries would only delay that.
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    }
    if settings.s3_access_key_id:
        options.update(access_key=settings.s3_access_key_id, secret_key=settings.s3_secret_access_key or "")
    if settings.s3_region:
        options["region"] = settings.s3_region
    endpoint = s3_endpoint(settings)
    if endpoint is not None:
        options["endpoint_override"], options["scheme"] = endpoint.netloc, endpoint.scheme
    return pafs.S3FileSystem(**options)


def preflight(settings: Settings) -> None:
    """One catalog query and one S3 HEAD of the bucket (short timeouts); :class:`MisconfiguredError` if unusable."""
    from pyarrow import fs as pafs

    _check_catalog(settings)
    if not on_s3(settings):
        return
    bucket = urlsplit(settings.warehouse).netloc
    endpoint = settings.s3_endpoint or "AWS S3"
    try:
        info = s3_filesystem(settings).get_file_info(bucket)
    except OSError as exc:
        text = _one_line(str(exc))
        if any(w in text for w in ("ACCESS_DENIED", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403")):
            problem = f"S3 at {endpoint} refused the credentials for bucket {bucket!r}"
            fix, setting = "fix ICEBERG_S3_ACCESS_KEY_ID and ICEBERG_S3_SECRET_ACCESS_KEY", "ICEBERG_S3_ACCESS_KEY_ID"
        elif any(w in text for w in ("NETWORK_CONNECTION", "curlCode", "Could not connect", "Couldn't resolve")):
            problem = f"cannot reach S3 at {endpoint}"
            fix, setting = "start the object store, or fix ICEBERG_S3_ENDPOINT", "ICEBERG_S3_ENDPOINT"
        else:
            raise
        raise MisconfiguredError(f"{problem} ({text}): {fix}", setting) from None
    if info.type == pafs.FileType.NotFound:
        raise MisconfiguredError(
            f"the S3 bucket {bucket!r} of ICEBERG_WAREHOUSE={settings.warehouse} does not exist at {endpoint}: "
            "create it, or fix the bucket in ICEBERG_WAREHOUSE",
            "ICEBERG_WAREHOUSE",
        )


def load_catalog(settings: Settings) -> SqlCatalog:
    """Open the SQL catalog, creating local directories and the namespaces on first use."""
    # Imported here: every dbt process imports this module (the plugin) and needs DuckDB, not pyiceberg.
    from pyiceberg.catalog.sql import SqlCatalog
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    if settings.catalog_uri.startswith("sqlite:///"):
        Path(settings.catalog_uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    if settings.warehouse.startswith("file://"):
        Path(settings.warehouse[len("file://") :]).mkdir(parents=True, exist_ok=True)
    properties = {**settings.catalog_properties, "uri": catalog_engine_uri(settings.catalog_uri)}
    for attempt in range(1, CREATION_ATTEMPTS + 1):
        try:
            catalog = SqlCatalog(settings.catalog_name, **properties)
            for ns in NAMESPACES:
                catalog.create_namespace_if_not_exists(ns)
            return catalog
        except (IntegrityError, ProgrammingError) as exc:
            # Lost the race to create the catalog's tables or a namespace: the winner's are there now.
            text = str(getattr(exc, "orig", None) or exc).lower()
            if attempt == CREATION_ATTEMPTS or not ("already exists" in text or "duplicate key" in text):
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def catalog_of(settings: Settings, catalog: Catalog | None = None) -> Catalog:
    """``catalog`` when the caller hands one down (a run's ``resources.IcebergCatalog``), else one opened now."""
    return catalog if catalog is not None else load_catalog(settings)


def on_s3(settings: Settings) -> bool:
    """Whether the warehouse is in S3-compatible object storage."""
    return settings.warehouse.startswith(("s3://", "s3a://", "s3n://"))


def s3_secret_sql(settings: Settings) -> str:
    """``CREATE SECRET`` for DuckDB's httpfs from the ``ICEBERG_S3_*`` settings (path-style on a custom endpoint)."""
    values = dict(key_id=settings.s3_access_key_id, secret=settings.s3_secret_access_key, region=settings.s3_region)
    endpoint = s3_endpoint(settings)
    if endpoint is not None:
        # DuckDB takes host:port; path-style (bucket in the path) needs no wildcard DNS name per bucket.
        values.update(endpoint=endpoint.netloc, url_style="path")
    options = ["type s3", *(f"{key} '{value.replace(QUOTE, QUOTE * 2)}'" for key, value in values.items() if value)]
    if endpoint is not None:
        options.append(f"use_ssl {'true' if endpoint.scheme == 'https' else 'false'}")
    return f"create or replace temporary secret {S3_SECRET} ({', '.join(options)})"


def _load(con: duckdb.DuckDBPyConnection, name: str) -> None:
    try:
        con.execute(f"load {name}")
    except duckdb.Error:
        import_extension(name, con=con)
        con.execute(f"load {name}")


def load_extensions(con: duckdb.DuckDBPyConnection, settings: Settings | None = None) -> duckdb.DuckDBPyConnection:
    """Load the extensions ``iceberg_scan`` needs (from their wheels); on an S3 warehouse also httpfs and its secret."""
    con.execute("set autoinstall_known_extensions = false")
    for name in EXTENSIONS:
        _load(con, name)
    if settings is not None and on_s3(settings):
        _load(con, "httpfs")
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
