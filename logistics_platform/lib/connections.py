"""Connections to the lakehouse: the pyiceberg SQL catalog and DuckDB with the Iceberg extensions.

The catalog is SQLite locally and PostgreSQL in prod; the warehouse is local files or S3 (``s3://bucket/prefix``).
DuckDB cannot download extensions here, so they are loaded from their PyPI packages; with an S3 warehouse DuckDB
also loads httpfs and gets a session secret built from the ``ICEBERG_S3_*`` settings.
"""

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
S3_EXTENSIONS = ("httpfs",)
# The name of the DuckDB secret for the warehouse (temporary: it lives in the connection, never in a file).
S3_SECRET = "logistics_warehouse"
# libpq waits for an unreachable host as long as the OS does; a catalog that is down should fail the command at once.
CONNECT_TIMEOUT_SECONDS = 5
# Opening the catalog again after losing the race to create its tables (see load_catalog).
CREATION_ATTEMPTS = 3


def catalog_engine_uri(uri: str) -> str:
    """``uri`` with a libpq connect timeout for PostgreSQL (unless it sets its own); other databases unchanged."""
    from sqlalchemy.engine import make_url

    url = make_url(uri)
    if url.get_backend_name() != "postgresql" or "connect_timeout" in url.query:
        return uri
    return url.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT_SECONDS)}).render_as_string(
        hide_password=False
    )


class MisconfiguredError(RuntimeError):
    """The catalog or the warehouse cannot be used as configured; the one-line message names the setting to fix.

    Retrying cannot help (a closed port, a wrong login, a missing database or bucket): callers fail at once.
    """

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
    if any(w in low for w in ("password authentication failed", "no pg_hba.conf entry")) or (
        "role" in low and "does not exist" in low
    ):
        return MisconfiguredError(
            f"the Iceberg catalog at {where} refused the login ({text}): fix the user or password in "
            "ICEBERG_CATALOG_URI",
            "ICEBERG_CATALOG_URI",
        )
    if "database" in low and "does not exist" in low:
        return MisconfiguredError(
            f"the Iceberg catalog database at {where} does not exist ({text}): create it, or fix the database "
            "name in ICEBERG_CATALOG_URI",
            "ICEBERG_CATALOG_URI",
        )
    unreachable = (
        "connection refused",
        "could not connect",
        "timeout expired",
        "could not translate host name",
        "name or service not known",
        "no route to host",
        "network is unreachable",
        "unable to open database file",
    )
    if any(w in low for w in unreachable):
        return MisconfiguredError(
            f"cannot reach the Iceberg catalog at {where} ({text}): start the database, or fix the host and port in "
            "ICEBERG_CATALOG_URI",
            "ICEBERG_CATALOG_URI",
        )
    return None


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
    endpoint = settings.s3.get("s3.endpoint")
    if not endpoint:
        return None
    return urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")


def s3_filesystem(settings: Settings) -> Any:
    """A pyarrow S3FileSystem on the warehouse's endpoint with the settings' credentials and short timeouts."""
    from pyarrow import fs as pafs

    options: dict[str, Any] = {
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "request_timeout": CONNECT_TIMEOUT_SECONDS,
        # One attempt: the pre-flight check says what is wrong now; the SDK's retries would only delay that.
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=1),
    }
    if settings.s3.get("s3.access-key-id"):
        options["access_key"] = settings.s3["s3.access-key-id"]
        options["secret_key"] = settings.s3.get("s3.secret-access-key", "")
    if settings.s3.get("s3.region"):
        options["region"] = settings.s3["s3.region"]
    endpoint = s3_endpoint(settings)
    if endpoint is not None:
        options["endpoint_override"], options["scheme"] = endpoint.netloc, endpoint.scheme
    return pafs.S3FileSystem(**options)


def _check_warehouse(settings: Settings) -> None:
    from pyarrow import fs as pafs

    if not on_s3(settings):
        return
    bucket = urlsplit(settings.warehouse).netloc
    endpoint = settings.s3.get("s3.endpoint") or "AWS S3"
    try:
        info = s3_filesystem(settings).get_file_info(bucket)
    except OSError as exc:
        text = _one_line(str(exc))
        if any(w in text for w in ("ACCESS_DENIED", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403")):
            raise MisconfiguredError(
                f"S3 at {endpoint} refused the credentials for bucket {bucket!r} ({text}): fix "
                "ICEBERG_S3_ACCESS_KEY_ID and ICEBERG_S3_SECRET_ACCESS_KEY",
                "ICEBERG_S3_ACCESS_KEY_ID",
            ) from None
        if any(w in text for w in ("NETWORK_CONNECTION", "curlCode", "Could not connect", "Couldn't resolve")):
            raise MisconfiguredError(
                f"cannot reach S3 at {endpoint} ({text}): start the object store, or fix ICEBERG_S3_ENDPOINT",
                "ICEBERG_S3_ENDPOINT",
            ) from None
        raise
    if info.type == pafs.FileType.NotFound:
        raise MisconfiguredError(
            f"the S3 bucket {bucket!r} of ICEBERG_WAREHOUSE={settings.warehouse} does not exist at {endpoint}: "
            "create it, or fix the bucket in ICEBERG_WAREHOUSE",
            "ICEBERG_WAREHOUSE",
        )


def preflight(settings: Settings) -> None:
    """One cheap catalog query and one S3 HEAD of the warehouse bucket, each with a short connect timeout.

    Raises :class:`MisconfiguredError` naming the setting to fix when either cannot be used as configured.
    """
    _check_catalog(settings)
    _check_warehouse(settings)


def load_catalog(settings: Settings) -> SqlCatalog:
    """Open the SQL catalog, creating local directories and the namespaces on first use."""
    # Imported here: every dbt process imports this module (the plugin) and needs DuckDB, not pyiceberg.
    from pyiceberg.catalog.sql import SqlCatalog

    if settings.catalog_uri.startswith("sqlite:///"):
        Path(settings.catalog_uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    if settings.warehouse.startswith("file://"):
        Path(settings.warehouse[len("file://") :]).mkdir(parents=True, exist_ok=True)
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    properties = {**settings.catalog_properties, "uri": catalog_engine_uri(settings.catalog_uri)}
    for attempt in range(1, CREATION_ATTEMPTS + 1):
        try:
            catalog = SqlCatalog(settings.catalog_name, **properties)
            for ns in NAMESPACES:
                catalog.create_namespace_if_not_exists(ns)
            return catalog
        except (IntegrityError, ProgrammingError) as exc:
            # Openers of an empty database each find the catalog's tables (or a namespace) missing and create
            # them; the losers of that race get a duplicate table, type or key. The winner's objects are there
            # now: opening again finds them (and creates nothing).
            if attempt == CREATION_ATTEMPTS or not _lost_creation_race(exc):
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def catalog_of(settings: Settings, catalog: Catalog | None = None) -> Catalog:
    """``catalog`` when the caller hands one down (a run's ``resources.IcebergCatalog``), else one opened now.

    For the callers that have no run to share one with: tests, benchmarks, the dbt plugin (its own process).
    """
    return catalog if catalog is not None else load_catalog(settings)


def _lost_creation_race(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", None) or exc).lower()
    return "already exists" in text or "duplicate key" in text


def on_s3(settings: Settings) -> bool:
    """Whether the warehouse is in S3-compatible object storage."""
    return settings.warehouse.startswith(("s3://", "s3a://", "s3n://"))


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def s3_secret_sql(settings: Settings) -> str:
    """``CREATE SECRET`` for DuckDB's httpfs from the ``ICEBERG_S3_*`` settings (path-style on a custom endpoint)."""
    options = {"type": "s3"}
    for key, prop in (("key_id", "s3.access-key-id"), ("secret", "s3.secret-access-key"), ("region", "s3.region")):
        if settings.s3.get(prop):
            options[key] = settings.s3[prop]
    endpoint = s3_endpoint(settings)
    if endpoint is not None:
        # DuckDB takes host:port and the scheme as a flag; S3-compatible servers are addressed path-style
        # (bucket in the path), which needs no wildcard DNS name per bucket.
        options["endpoint"] = endpoint.netloc
        options["url_style"] = "path"
        options["use_ssl"] = "true" if endpoint.scheme == "https" else "false"
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
