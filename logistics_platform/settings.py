"""The one place that decides the environment (local / prod) and reads configuration from env vars.

Nothing else in the package reads ``os.environ``: everything receives a :class:`Settings`.
Every variable has a documented default (see ``SETTINGS_DOC`` and the README's settings table).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DBT_PROJECT_DIR = PROJECT_ROOT / "dbt_project"

ENVIRONMENTS = ("local", "prod")

# name -> (default shown to people, meaning). The README table is generated from this.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "LOGISTICS_ENV": ("local", "Environment: `local` (embedded SQLite + files) or `prod` (PostgreSQL + S3)."),
    "LANDING_DIR": ("./landing", "Root of the Kafka Connect landing zone (`topics/<topic>/dt=/hr=`)."),
    "ICEBERG_CATALOG_URI": (
        "sqlite:///iceberg_warehouse/catalog.db",
        "SQLAlchemy URI of the pyiceberg SQL catalog (PostgreSQL in prod).",
    ),
    "ICEBERG_WAREHOUSE": ("file://iceberg_warehouse", "Warehouse root for new Iceberg tables (s3:// in prod)."),
    "DUCKDB_PATH": ("iceberg_warehouse/analytics.duckdb", "DuckDB database file that dbt builds into."),
    "ALLOWED_LATENESS_HOURS": ("2", "Allowed lateness L: later events update state but not event-time windows."),
    "ALERT_WEBHOOK_URL": ("(unset)", "Slack-compatible webhook that receives alerts; unset = local log only."),
    "ALERTS_LOG": (".dagster_home/alerts.jsonl", "JSON Lines file every alert is appended to."),
    "PARTITIONS_START": ("2026-11-01-00:00", "First arrival-hour partition (Dagster hourly key)."),
    "DBT_TARGET": ("local (prod when LOGISTICS_ENV=prod)", "dbt target in dbt_project/profiles.yml."),
    "INGEST_BATCH_ROWS": ("200000", "Rows per Arrow batch / data file written by the bronze ingest."),
    "INGEST_WORKERS": ("1", "Processes parsing a large arrival hour in parallel (1 = in the ingest process)."),
    "BRONZE_FRESHNESS_HOURS": ("2", "Bronze tables older than this fail their freshness check."),
    "MARTS_FRESHNESS_HOURS": ("26", "Marts older than this fail their freshness check."),
    "AUTOMATION_DEFAULT_STATUS": (
        "running",
        "Initial state of the sensors and schedules in a fresh Dagster instance: `running` or `stopped`.",
    ),
    "COMPACTION_TARGET_FILE_BYTES": ("134217728", "Target size of compacted data files (128 MiB)."),
    "COMPACTION_SMALL_FILE_BYTES": ("33554432", "Files below this size are compaction candidates (32 MiB)."),
    "SNAPSHOT_RETENTION_DAYS": ("7", "Snapshots older than this are expired (tagged ones are kept)."),
    "SNAPSHOT_MIN_KEEP": ("10", "Expiry always keeps at least this many recent snapshots."),
    "ORPHAN_SAFETY_DAYS": ("3", "Unreferenced files younger than this are never deleted (commits in flight)."),
    "MANIFEST_MAX_PER_SNAPSHOT": (
        "10",
        "The nightly run consolidates a snapshot's manifests above this many (each hourly commit adds one, and every "
        "query plan opens them all).",
    ),
    "DAILY_TAG_RETENTION_DAYS": ("365", "How long the `daily-YYYY-MM-DD` tags are kept."),
    "ICEBERG_S3_ENDPOINT": ("(unset)", "S3-compatible endpoint for the warehouse in prod."),
    "ICEBERG_S3_ACCESS_KEY_ID": ("(unset)", "S3 access key id (prod)."),
    "ICEBERG_S3_SECRET_ACCESS_KEY": ("(unset)", "S3 secret key (prod)."),
    "ICEBERG_S3_REGION": ("us-east-1", "S3 region (prod)."),
    "OLTP_DSN": ("(unset)", "libpq DSN of the OLTP PostgreSQL database that `capture` reads; unset = capture off."),
    "CAPTURE_SLOT": ("logistics_capture", "Logical replication slot of `capture` (also names its landing manifest)."),
    "CAPTURE_PUBLICATION": ("logistics_capture", "Publication of the contract's tables that the slot decodes."),
    "CAPTURE_QUERY_OVERLAP_SECONDS": (
        "300",
        "`capture --mode query` re-reads rows this far behind its updated_at watermark (late commits, clock skew).",
    ),
    "CAPTURE_LAG_WARN_BYTES": ("67108864", "The capture lag check warns when the slot is this many WAL bytes behind."),
    "CAPTURE_LAG_WARN_SECONDS": ("900", "The capture lag check warns when the last capture is this old and behind."),
    "CAPTURE_WAL_RETENTION_ALERT_BYTES": (
        "1073741824",
        "Alert when the slot is inactive and keeps more WAL than this on the OLTP server (1 GiB).",
    ),
    "PUBLISH_MAX_ROW_DROP": (
        "0.5",
        "The publish audit fails a mart (except `late_events`) whose row count would fall by more than this share "
        "of main's (when main has 100 rows or more); 1 lets any drop through.",
    ),
    "ICEBERG_CATALOG_NAME": (
        "logistics",
        "Catalog name in the SQL catalog's rows; Spark/Trino/Flink `JdbcCatalog` readers must use the same name.",
    ),
    "SLA_WINDOW_MINUTES": ("5", "Width of the event-time windows of marts.fct_region_sla (a divisor of 60)."),
    "SLA_MIN_DELIVERIES": ("20", "An SLA window breaches only with at least this many deliveries."),
    "SLA_LATE_SHARE_MAX": ("0.05", "An SLA window breaches when its late share exceeds this."),
    "GPS_JUMP_KMH": ("150", "marts.fct_courier_gps_jumps: consecutive pings implying a higher speed are jumps."),
    "INGEST_MAX_HOURS_PER_RUN": (
        "24",
        "Most arrival hours one ingest run takes (backfills, `run`, `rebuild`): one Iceberg commit per table for them.",
    ),
    "DAGSTER_HOME": (
        "(unset; `make` sets .dagster_home)",
        "Dagster's instance directory (its dagster.yaml); `run` uses a throwaway instance when unset.",
    ),
    "DASHBOARD_PORT": ("8501", "Port of the operations dashboard (`make dashboard`), served on 127.0.0.1."),
}

# Read by Dagster itself in every Dagster process (webserver, daemon, code server, runs); the prod deployment files
# set it, and `run` sets it for its runs when its instance stores events on PostgreSQL (a no-op on SQLite).
SETTINGS_DOC["DAGSTER_EVENT_BATCH_SIZE"] = (
    "1000",
    "Dagster writes up to this many asset events of one step in one statement on PostgreSQL storage (0 = one by one).",
)


class SettingsError(ValueError):
    """A configuration value is invalid; the message names the variable and what it accepts."""


@dataclass(frozen=True)
class Settings:
    """Resolved platform configuration. Build it with :func:`load_settings`."""

    env: str = "local"
    landing_dir: Path = PROJECT_ROOT / "landing"
    catalog_uri: str = f"sqlite:///{PROJECT_ROOT / 'iceberg_warehouse' / 'catalog.db'}"
    warehouse: str = f"file://{PROJECT_ROOT / 'iceberg_warehouse'}"
    duckdb_path: Path = PROJECT_ROOT / "iceberg_warehouse" / "analytics.duckdb"
    allowed_lateness_hours: float = 2.0
    alert_webhook_url: str | None = None
    alerts_log: Path = PROJECT_ROOT / ".dagster_home" / "alerts.jsonl"
    partitions_start: str = "2026-11-01-00:00"
    dbt_target: str = "local"
    ingest_batch_rows: int = 200_000
    ingest_workers: int = 1
    bronze_freshness_hours: float = 2.0
    marts_freshness_hours: float = 26.0
    automation_running: bool = True
    compaction_target_file_bytes: int = 128 * 1024 * 1024
    compaction_small_file_bytes: int = 32 * 1024 * 1024
    snapshot_retention_days: float = 7.0
    snapshot_min_keep: int = 10
    orphan_safety_days: float = 3.0
    manifest_max_per_snapshot: int = 10
    daily_tag_retention_days: int = 365
    s3: dict[str, str] = field(default_factory=dict)
    oltp_dsn: str | None = None
    capture_slot: str = "logistics_capture"
    capture_publication: str = "logistics_capture"
    capture_query_overlap_seconds: float = 300.0
    capture_lag_warn_bytes: int = 64 * 1024 * 1024
    capture_lag_warn_seconds: float = 900.0
    capture_wal_retention_alert_bytes: int = 1024 * 1024 * 1024
    publish_max_row_drop: float = 0.5
    # Every row of the JDBC-catalog tables carries it: another engine sees our tables only under the same name.
    catalog_name: str = "logistics"
    sla_window_minutes: int = 5
    sla_min_deliveries: int = 20
    sla_late_share_max: float = 0.05
    gps_jump_kmh: float = 150.0
    ingest_max_hours_per_run: int = 24
    # Read by Dagster itself too; here only to know whether a persistent instance is configured.
    dagster_home: Path | None = None
    dashboard_port: int = 8501
    # Dagster's event batching on PostgreSQL instance storage (see SETTINGS_DOC).
    dagster_event_batch_size: int = 1000

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
        return datetime.strptime(self.partitions_start, "%Y-%m-%d-%H:%M")

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with some fields replaced (tests and CLI flags)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _path(value: str, base: Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _number(env: Mapping[str, str], name: str, default: float, kind: type = float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a {kind.__name__}; unset it to use {default}") from None
    if value < 0:
        raise SettingsError(f"{name}={raw!r} must not be negative")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    """``env[name]`` (case-insensitive, ``default`` when unset or empty), which must be one of ``allowed``."""
    value = (env.get(name) or "").strip().lower() or default
    if value not in allowed:
        raise SettingsError(f"{name}={value!r}: expected one of {', '.join(allowed)}")
    return value


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the settings from ``environ`` (default: the process environment)."""
    env = dict(os.environ if environ is None else environ)
    mode = _choice(env, "LOGISTICS_ENV", "local", ENVIRONMENTS)
    cwd = Path.cwd()
    d = Settings()
    start = env.get("PARTITIONS_START", d.partitions_start)
    try:
        datetime.strptime(start, "%Y-%m-%d-%H:%M")
    except ValueError:
        raise SettingsError(f"PARTITIONS_START={start!r}: expected YYYY-MM-DD-HH:MM, e.g. 2026-11-01-00:00") from None

    catalog_uri = env.get("ICEBERG_CATALOG_URI") or d.catalog_uri
    warehouse = env.get("ICEBERG_WAREHOUSE") or d.warehouse
    if warehouse.startswith("file://") and not warehouse.startswith("file:///"):
        # file://relative/path: resolve against the working directory like every other path setting.
        warehouse = f"file://{_path(warehouse[len('file://') :], cwd)}"
    if mode == "prod" and catalog_uri.startswith("sqlite"):
        raise SettingsError(
            "LOGISTICS_ENV=prod needs ICEBERG_CATALOG_URI on PostgreSQL "
            "(postgresql+psycopg2://user@host:5432/db); the SQLite catalog does not take parallel writers"
        )
    s3 = {}
    for key, prop in (
        ("ICEBERG_S3_ENDPOINT", "s3.endpoint"),
        ("ICEBERG_S3_ACCESS_KEY_ID", "s3.access-key-id"),
        ("ICEBERG_S3_SECRET_ACCESS_KEY", "s3.secret-access-key"),
        ("ICEBERG_S3_REGION", "s3.region"),
    ):
        if env.get(key):
            s3[prop] = env[key]

    automation = _choice(env, "AUTOMATION_DEFAULT_STATUS", "running", ("running", "stopped"))

    return Settings(
        env=mode,
        landing_dir=_path(env["LANDING_DIR"], cwd) if env.get("LANDING_DIR") else d.landing_dir,
        catalog_uri=catalog_uri,
        warehouse=warehouse,
        duckdb_path=_path(env["DUCKDB_PATH"], cwd) if env.get("DUCKDB_PATH") else d.duckdb_path,
        allowed_lateness_hours=_number(env, "ALLOWED_LATENESS_HOURS", d.allowed_lateness_hours),
        alert_webhook_url=env.get("ALERT_WEBHOOK_URL") or None,
        alerts_log=_path(env["ALERTS_LOG"], cwd) if env.get("ALERTS_LOG") else d.alerts_log,
        partitions_start=start,
        dbt_target=env.get("DBT_TARGET") or ("prod" if mode == "prod" else "local"),
        ingest_batch_rows=int(_number(env, "INGEST_BATCH_ROWS", d.ingest_batch_rows, int)),
        ingest_workers=max(1, int(_number(env, "INGEST_WORKERS", d.ingest_workers, int))),
        bronze_freshness_hours=_number(env, "BRONZE_FRESHNESS_HOURS", d.bronze_freshness_hours),
        marts_freshness_hours=_number(env, "MARTS_FRESHNESS_HOURS", d.marts_freshness_hours),
        automation_running=automation == "running",
        compaction_target_file_bytes=int(
            _number(env, "COMPACTION_TARGET_FILE_BYTES", d.compaction_target_file_bytes, int)
        ),
        compaction_small_file_bytes=int(
            _number(env, "COMPACTION_SMALL_FILE_BYTES", d.compaction_small_file_bytes, int)
        ),
        snapshot_retention_days=_number(env, "SNAPSHOT_RETENTION_DAYS", d.snapshot_retention_days),
        snapshot_min_keep=int(_number(env, "SNAPSHOT_MIN_KEEP", d.snapshot_min_keep, int)),
        orphan_safety_days=_number(env, "ORPHAN_SAFETY_DAYS", d.orphan_safety_days),
        manifest_max_per_snapshot=int(_number(env, "MANIFEST_MAX_PER_SNAPSHOT", d.manifest_max_per_snapshot, int)),
        daily_tag_retention_days=int(_number(env, "DAILY_TAG_RETENTION_DAYS", d.daily_tag_retention_days, int)),
        s3=s3,
        oltp_dsn=env.get("OLTP_DSN") or None,
        capture_slot=env.get("CAPTURE_SLOT") or d.capture_slot,
        capture_publication=env.get("CAPTURE_PUBLICATION") or d.capture_publication,
        capture_query_overlap_seconds=_number(env, "CAPTURE_QUERY_OVERLAP_SECONDS", d.capture_query_overlap_seconds),
        capture_lag_warn_bytes=int(_number(env, "CAPTURE_LAG_WARN_BYTES", d.capture_lag_warn_bytes, int)),
        capture_lag_warn_seconds=_number(env, "CAPTURE_LAG_WARN_SECONDS", d.capture_lag_warn_seconds),
        capture_wal_retention_alert_bytes=int(
            _number(env, "CAPTURE_WAL_RETENTION_ALERT_BYTES", d.capture_wal_retention_alert_bytes, int)
        ),
        publish_max_row_drop=min(1.0, _number(env, "PUBLISH_MAX_ROW_DROP", d.publish_max_row_drop)),
        catalog_name=_catalog_name(env.get("ICEBERG_CATALOG_NAME") or d.catalog_name),
        sla_window_minutes=_sla_window_minutes(env, d.sla_window_minutes),
        sla_min_deliveries=int(_number(env, "SLA_MIN_DELIVERIES", d.sla_min_deliveries, int)),
        sla_late_share_max=_number(env, "SLA_LATE_SHARE_MAX", d.sla_late_share_max),
        gps_jump_kmh=_number(env, "GPS_JUMP_KMH", d.gps_jump_kmh),
        ingest_max_hours_per_run=max(1, int(_number(env, "INGEST_MAX_HOURS_PER_RUN", d.ingest_max_hours_per_run, int))),
        dagster_home=_path(env["DAGSTER_HOME"], cwd) if env.get("DAGSTER_HOME") else None,
        dashboard_port=_port(env, "DASHBOARD_PORT", d.dashboard_port),
        dagster_event_batch_size=int(_number(env, "DAGSTER_EVENT_BATCH_SIZE", d.dagster_event_batch_size, int)),
    )


def _sla_window_minutes(env: Mapping[str, str], default: int) -> int:
    """SLA windows are aligned to the hour, so their width must divide it."""
    minutes = int(_number(env, "SLA_WINDOW_MINUTES", default, int))
    if minutes == 0 or 60 % minutes:
        raise SettingsError(
            f"SLA_WINDOW_MINUTES={minutes}: SLA windows are aligned to the hour, use a divisor of 60 (1, 2, 3, 4, 5, "
            "6, 10, 12, 15, 20, 30, 60)"
        )
    return minutes


def _port(env: Mapping[str, str], name: str, default: int) -> int:
    port = int(_number(env, name, default, int))
    if not 0 < port < 65536:
        raise SettingsError(f"{name}={port}: a TCP port is between 1 and 65535; unset it to use {default}")
    return port


def _catalog_name(value: str) -> str:
    # Spark and Flink take the name as a configuration key (spark.sql.catalog.<name>): keep it an identifier.
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise SettingsError(
            f"ICEBERG_CATALOG_NAME={value!r}: expected a plain identifier (letters, digits, underscores), "
            "the name Spark/Trino/Flink JDBC catalogs are configured with"
        )
    return value


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


# Settings field -> the variable the dbt child process reads it from (the S3 ones only when set).
_S3_VARIABLES = {
    "s3.endpoint": "ICEBERG_S3_ENDPOINT",
    "s3.access-key-id": "ICEBERG_S3_ACCESS_KEY_ID",
    "s3.secret-access-key": "ICEBERG_S3_SECRET_ACCESS_KEY",
    "s3.region": "ICEBERG_S3_REGION",
}


def dbt_env(settings: Settings) -> dict[str, str]:
    """What a dbt process needs to see of ``settings``: profiles.yml and the dbt-duckdb plugin read these variables."""
    env = {
        "LOGISTICS_ENV": settings.env,
        "LANDING_DIR": str(settings.landing_dir),
        "ICEBERG_CATALOG_URI": settings.catalog_uri,
        "ICEBERG_WAREHOUSE": settings.warehouse,
        "DUCKDB_PATH": str(settings.duckdb_path),
        "ALLOWED_LATENESS_HOURS": str(settings.allowed_lateness_hours),
        "DBT_TARGET": settings.dbt_target,
        "ICEBERG_CATALOG_NAME": settings.catalog_name,
        "SLA_WINDOW_MINUTES": str(settings.sla_window_minutes),
        "SLA_MIN_DELIVERIES": str(settings.sla_min_deliveries),
        "SLA_LATE_SHARE_MAX": str(settings.sla_late_share_max),
        "GPS_JUMP_KMH": str(settings.gps_jump_kmh),
        "DO_NOT_TRACK": "1",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "False",
    }
    env.update({_S3_VARIABLES[prop]: value for prop, value in settings.s3.items() if prop in _S3_VARIABLES})
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
