"""The one place that decides the environment (local / prod) and reads configuration from env vars.

Nothing else in the package reads ``os.environ``: everything receives a :class:`Settings`. Each setting is declared
once, as a field of :class:`Settings` (variable, default, meaning, parser, whether dbt gets it; see
``settings_schema.py``); ``load_settings``, the dbt environment and the settings table of docs/settings.md come
from there.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from logistics_platform.lib.timekeys import parse_hour_key
from logistics_platform.settings_schema import (
    DECLARATIONS,
    ENVIRONMENTS,
    PROJECT_ROOT,
    Setting,
    Source,
    amount,
    at_least_one,
    catalog_uri,
    choice,
    count,
    dbt_target,
    hour_key,
    identifier,
    is_running,
    minutes_dividing_an_hour,
    optional_path,
    optional_text,
    path,
    port,
    setting,
    setting_map,
    share,
    text,
    threads,
    warehouse,
)
from logistics_platform.settings_schema import SettingsError as SettingsError

DBT_PROJECT_DIR = PROJECT_ROOT / "dbt_project"


@dataclass(frozen=True)
class Settings:
    """Resolved platform configuration. Build it with :func:`load_settings`; each field declares its variable."""

    env: str = setting(
        "LOGISTICS_ENV",
        "local",
        "Environment: `local` (embedded SQLite + files) or `prod` (PostgreSQL + S3).",
        choice(*ENVIRONMENTS),
        dbt=True,
    )
    landing_dir: Path = setting(
        "LANDING_DIR", "./landing", "Root of the Kafka Connect landing zone (`topics/<topic>/dt=/hr=`).", path, dbt=True
    )
    catalog_uri: str = setting(
        "ICEBERG_CATALOG_URI",
        "sqlite:///iceberg_warehouse/catalog.db",
        "SQLAlchemy URI of the pyiceberg SQL catalog (PostgreSQL in prod).",
        catalog_uri,
        dbt=True,
    )
    warehouse: str = setting(
        "ICEBERG_WAREHOUSE",
        "file://iceberg_warehouse",
        "Warehouse root for new Iceberg tables (s3:// in prod).",
        warehouse,
        dbt=True,
    )
    duckdb_path: Path = setting(
        "DUCKDB_PATH",
        "iceberg_warehouse/analytics.duckdb",
        "DuckDB database file that dbt builds into.",
        path,
        dbt=True,
    )
    allowed_lateness_hours: float = setting(
        "ALLOWED_LATENESS_HOURS",
        "2",
        "Allowed lateness L: later events update state but not event-time windows.",
        amount,
        dbt=True,
    )
    alert_webhook_url: str | None = setting(
        "ALERT_WEBHOOK_URL", "", "Slack-compatible webhook that receives alerts; unset = local log only.", optional_text
    )
    alerts_log: Path = setting(
        "ALERTS_LOG", ".dagster_home/alerts.jsonl", "JSON Lines file every alert is appended to.", path
    )
    partitions_start: str = setting(
        "PARTITIONS_START", "2026-11-01-00:00", "First arrival-hour partition (Dagster hourly key).", hour_key
    )
    dbt_target: str = setting(
        "DBT_TARGET",
        "",
        "dbt target in dbt_project/profiles.yml.",
        dbt_target,
        dbt=True,
        shown="local (prod when LOGISTICS_ENV=prod)",
    )
    dbt_threads: int = setting(
        "DBT_THREADS", "4", "dbt threads of the `prod` target (the `local` target uses 2).", threads, dbt=True
    )
    spark_master: str = setting(
        "SPARK_MASTER",
        "local[*]",
        "Spark master of dbt's `spark` target (`local[*]`, `spark://host:7077`, `k8s://https://...`).",
        text,
    )
    spark_conf_file: Path | None = setting(
        "SPARK_CONF_FILE",
        "",
        "Extra Spark settings of dbt's `spark` target (`key value` lines, over ours): a cluster's image, driver host, "
        "S3 (docs/spark.md).",
        optional_path,
    )
    spark_venv: Path = setting(
        "SPARK_VENV",
        ".venv-spark",
        "The venv scripts/spark_env.sh builds (PySpark, dbt-spark, Iceberg's jars) that runs dbt's `spark` target.",
        path,
    )
    duckdb_memory_limit: str = setting(
        "DUCKDB_MEMORY_LIMIT", "8GB", "DuckDB memory limit of dbt's `prod` target (DuckDB's syntax).", text, dbt=True
    )
    debezium_decimal_handling_mode: str = setting(
        "DEBEZIUM_DECIMAL_HANDLING_MODE",
        "precise",
        "The connector's `decimal.handling.mode`: `precise` (base64 Connect Decimal), `string` or `double`; "
        "decimal strings and JSON numbers are read in every mode.",
        choice("precise", "string", "double"),
    )
    ingest_batch_rows: int = setting(
        "INGEST_BATCH_ROWS", "200000", "Rows per Arrow batch / data file written by the bronze ingest.", count
    )
    ingest_workers: int = setting(
        "INGEST_WORKERS",
        "1",
        "Processes parsing a large arrival hour in parallel (1 = in the ingest process).",
        at_least_one,
    )
    bronze_freshness_hours: float = setting(
        "BRONZE_FRESHNESS_HOURS", "2", "Bronze tables older than this fail their freshness check.", amount
    )
    marts_freshness_hours: float = setting(
        "MARTS_FRESHNESS_HOURS", "26", "Marts older than this fail their freshness check.", amount
    )
    automation_running: bool = setting(
        "AUTOMATION_DEFAULT_STATUS",
        "running",
        "Initial state of the sensors and schedules in a fresh Dagster instance: `running` or `stopped`.",
        is_running,
    )
    compaction_target_file_bytes: int = setting(
        "COMPACTION_TARGET_FILE_BYTES", "134217728", "Target size of compacted data files (128 MiB).", count
    )
    compaction_small_file_bytes: int = setting(
        "COMPACTION_SMALL_FILE_BYTES", "33554432", "Files below this size are compaction candidates (32 MiB).", count
    )
    snapshot_retention_days: float = setting(
        "SNAPSHOT_RETENTION_DAYS", "7", "Snapshots older than this are expired (tagged ones are kept).", amount
    )
    snapshot_min_keep: int = setting(
        "SNAPSHOT_MIN_KEEP", "10", "Expiry always keeps at least this many recent snapshots.", count
    )
    orphan_safety_days: float = setting(
        "ORPHAN_SAFETY_DAYS",
        "3",
        "Unreferenced files younger than this are never deleted (commits in flight).",
        amount,
    )
    manifest_max_per_snapshot: int = setting(
        "MANIFEST_MAX_PER_SNAPSHOT",
        "10",
        "The nightly run consolidates a snapshot's manifests above this many (each hourly commit adds one, and every "
        "query plan opens them all).",
        count,
    )
    daily_tag_retention_days: int = setting(
        "DAILY_TAG_RETENTION_DAYS", "365", "How long the `daily-YYYY-MM-DD` tags are kept.", count
    )
    # pyiceberg FileIO property -> value, for the variables that are set.
    s3: dict[str, str] = setting_map(
        Setting(
            "ICEBERG_S3_ENDPOINT",
            "",
            "S3-compatible endpoint for the warehouse in prod.",
            text,
            dbt=True,
            key="s3.endpoint",
        ),
        Setting("ICEBERG_S3_ACCESS_KEY_ID", "", "S3 access key id (prod).", text, dbt=True, key="s3.access-key-id"),
        Setting(
            "ICEBERG_S3_SECRET_ACCESS_KEY", "", "S3 secret key (prod).", text, dbt=True, key="s3.secret-access-key"
        ),
        Setting("ICEBERG_S3_REGION", "", "S3 region (prod).", text, dbt=True, shown="us-east-1", key="s3.region"),
    )
    oltp_dsn: str | None = setting(
        "OLTP_DSN",
        "",
        "libpq DSN of the OLTP PostgreSQL database that `capture` reads; unset = capture off.",
        optional_text,
    )
    capture_slot: str = setting(
        "CAPTURE_SLOT",
        "logistics_capture",
        "Logical replication slot of `capture` (also names its landing manifest).",
        text,
    )
    capture_publication: str = setting(
        "CAPTURE_PUBLICATION", "logistics_capture", "Publication of the contract's tables that the slot decodes.", text
    )
    capture_query_overlap_seconds: float = setting(
        "CAPTURE_QUERY_OVERLAP_SECONDS",
        "300",
        "`capture --mode query` re-reads rows this far behind its updated_at watermark (late commits, clock skew).",
        amount,
    )
    capture_lag_warn_bytes: int = setting(
        "CAPTURE_LAG_WARN_BYTES",
        "67108864",
        "The capture lag check warns when the slot is this many WAL bytes behind.",
        count,
    )
    capture_lag_warn_seconds: float = setting(
        "CAPTURE_LAG_WARN_SECONDS",
        "900",
        "The capture lag check warns when the last capture is this old and behind.",
        amount,
    )
    capture_wal_retention_alert_bytes: int = setting(
        "CAPTURE_WAL_RETENTION_ALERT_BYTES",
        "1073741824",
        "Alert when the slot is inactive and keeps more WAL than this on the OLTP server (1 GiB).",
        count,
    )
    publish_max_row_drop: float = setting(
        "PUBLISH_MAX_ROW_DROP",
        "0.5",
        "The publish audit fails a mart (except `late_events`) whose row count would fall by more than this share "
        "of main's (when main has 100 rows or more); 1 lets any drop through.",
        share,
    )
    # Every row of the JDBC-catalog tables carries it: another engine sees our tables only under the same name.
    catalog_name: str = setting(
        "ICEBERG_CATALOG_NAME",
        "logistics",
        "Catalog name in the SQL catalog's rows; Spark/Trino/Flink `JdbcCatalog` readers must use the same name.",
        identifier,
        dbt=True,
    )
    sla_window_minutes: int = setting(
        "SLA_WINDOW_MINUTES",
        "5",
        "Width of the event-time windows of marts.fct_region_sla (a divisor of 60).",
        minutes_dividing_an_hour,
        dbt=True,
    )
    sla_min_deliveries: int = setting(
        "SLA_MIN_DELIVERIES", "20", "An SLA window breaches only with at least this many deliveries.", count, dbt=True
    )
    sla_late_share_max: float = setting(
        "SLA_LATE_SHARE_MAX", "0.05", "An SLA window breaches when its late share exceeds this.", amount, dbt=True
    )
    gps_jump_kmh: float = setting(
        "GPS_JUMP_KMH",
        "150",
        "marts.fct_courier_gps_jumps: consecutive pings implying a higher speed are jumps.",
        amount,
        dbt=True,
    )
    ingest_max_hours_per_run: int = setting(
        "INGEST_MAX_HOURS_PER_RUN",
        "24",
        "Most arrival hours one ingest run takes (backfills, `run`, `rebuild`): one Iceberg commit per table for them.",
        at_least_one,
    )
    # Read by Dagster itself too; here only to know whether a persistent instance is configured.
    dagster_home: Path | None = setting(
        "DAGSTER_HOME",
        "",
        "Dagster's instance directory (its dagster.yaml); `run` uses a throwaway instance when unset.",
        optional_path,
        shown="(unset; `make` sets .dagster_home)",
    )
    dashboard_port: int = setting(
        "DASHBOARD_PORT", "8501", "Port of the operations dashboard (`make dashboard`), served on 127.0.0.1.", port
    )
    # Read by Dagster itself in every Dagster process (webserver, daemon, code server, runs); the prod deployment
    # files set it, and `run` sets it for its runs when its instance stores events on PostgreSQL (a no-op on SQLite).
    dagster_event_batch_size: int = setting(
        "DAGSTER_EVENT_BATCH_SIZE",
        "1000",
        "Dagster writes up to this many asset events of one step in one statement on PostgreSQL storage "
        "(0 = one by one).",
        count,
    )

    @property
    def duckdb_database(self) -> str:
        """The catalog name DuckDB gives ``duckdb_path`` (the file name up to its first dot); dbt qualifies with it."""
        name = self.duckdb_path.name.lstrip(".").split(".")[0]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(
                f"DUCKDB_PATH={self.duckdb_path}: dbt attaches the file under its name, so the part before the first "
                f"dot must be a plain identifier (letters, digits, underscores), not {name!r}; rename the file."
            )
        return name

    @property
    def allowed_lateness_seconds(self) -> int:
        return int(self.allowed_lateness_hours * 3600)

    @property
    def catalog_properties(self) -> dict[str, str]:
        """Properties for pyiceberg's SqlCatalog (and the FileIO behind it)."""
        props = {"uri": self.catalog_uri, "warehouse": self.warehouse}
        props.update(self.s3)
        return props

    @property
    def partitions_start_datetime(self) -> datetime:
        return parse_hour_key(self.partitions_start)

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with some fields replaced (tests and CLI flags)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def declarations() -> Iterator[tuple[str, Setting]]:
    """(field, declaration) of every setting, in the order the fields are declared (the settings table's order)."""
    for f in fields(Settings):
        for declared in f.metadata.get(DECLARATIONS, ()):
            yield f.name, declared


# name -> (default shown to people, meaning): the settings table of docs/settings.md.
SETTINGS_DOC: dict[str, tuple[str, str]] = {s.name: (s.shown_default, s.doc) for _field, s in declarations()}
_ENV_SETTING = next(s for name, s in declarations() if name == "env")


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the settings from ``environ`` (default: the process environment)."""
    env = dict(os.environ if environ is None else environ)
    cwd = Path.cwd()
    # The environment first: the defaults and checks of other settings depend on it.
    mode = _ENV_SETTING.read(env.get(_ENV_SETTING.name), Source(cwd, "local", unset=False))
    source = Source(cwd, mode, unset=False)
    values: dict[str, Any] = {}
    for name, s in declarations():
        value = s.read(env.get(s.name), source)
        if not s.key:
            values[name] = value
        elif value:
            values.setdefault(name, {})[s.key] = value
    return Settings(**values)


def local_settings(root: Path, **overrides: object) -> Settings:
    """Settings that keep every piece of state under ``root`` (tests, benchmarks, rebuilds)."""
    root = Path(root).resolve()
    base = Settings(
        landing_dir=root / "landing",
        catalog_uri=f"sqlite:///{root / 'warehouse' / 'catalog.db'}",
        warehouse=f"file://{root / 'warehouse'}",
        duckdb_path=root / "warehouse" / "analytics.duckdb",
        alerts_log=root / "alerts.jsonl",
    )
    return base.with_overrides(**overrides) if overrides else base


# Set for every dbt process: no usage tracking (offline operation).
_DBT_TOOL_ENV = {"DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "False"}


def dbt_env(settings: Settings) -> dict[str, str]:
    """What a dbt process needs to see of ``settings``: the variables of the settings declared ``dbt`` (those set).

    profiles.yml, the macros and the dbt-duckdb plugin read them with no defaults of their own: a dbt run without
    them fails naming the variable.
    """
    env = dict(_DBT_TOOL_ENV)
    for name, s in declarations():
        value = getattr(settings, name)
        if s.key:
            value = value.get(s.key)
        if s.dbt and value is not None:
            env[s.name] = str(value)
    return env


def subprocess_env(settings: Settings) -> dict[str, str]:
    """Environment for child processes (dbt, `dagster dev`): the parent's, plus the resolved settings, tracking off."""
    return {**os.environ, **dbt_env(settings)}


_DBT_ENV_LOCK = threading.Lock()


@contextmanager
def dbt_environment(settings: Settings, extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """Apply :func:`dbt_env` (plus ``extra``, e.g. the arrival window) to this process's environment, then restore it.

    Why touch ``os.environ`` at all: dagster-dbt's ``DbtCliResource.cli`` has no ``env`` parameter; it builds the
    dbt child's environment from ``os.environ.copy()`` when it is called (and renders profiles.yml in this process
    from it), and the child is started before the call returns. So the variables are applied only around that
    call, one call at a time per process (the lock: two threads of a run must not interleave their values), and
    the previous values come back afterwards. Settings built on other directories (tests, benchmarks, rebuilds)
    then reach dbt even though this process's environment does not hold them.
    """
    wanted = {**dbt_env(settings), **(extra or {})}
    # DuckDB creates its file but not the directory; with an s3:// warehouse nothing else creates it.
    settings.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    with _DBT_ENV_LOCK:
        saved = {name: os.environ.get(name) for name in wanted}
        os.environ.update(wanted)
        try:
            yield
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
