"""The one place that reads configuration from env vars: one pydantic-settings class (docs/internals/core.md)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AliasGenerator, BeforeValidator, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from logistics_platform.lib.timekeys import parse_hour_key

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DBT_PROJECT_DIR = PROJECT_ROOT / "dbt_project"
_DBT_SHOWN = {"dbt": True, "shown": "local (prod when LOGISTICS_ENV=prod)"}
IDENTIFIER = "expected a plain identifier (letters, digits, underscores), as JDBC catalogs are named"
ALIGNED = "SLA windows are aligned to the hour, use a divisor of 60 (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)"


# False while load_settings validates a given mapping, which must not pick up the caller's environment.
_READ_ENVIRONMENT: ContextVar[bool] = ContextVar("read_environment", default=True)


class SettingsError(ValueError):
    """A configuration value is invalid; the message names the variable and what it accepts."""


def _from_cwd(p: Path) -> Path:
    # A value from the environment is taken from the working directory; the defaults are absolute (in the project).
    p = p.expanduser()
    return p if p.is_absolute() else (Path.cwd() / p).resolve()


def _choice(default: str) -> BeforeValidator:
    """A case-insensitive choice; blank means ``default``."""
    return BeforeValidator(lambda v: (v.strip().lower() or default) if isinstance(v, str) else v)


def _check(ok: Callable[[Any], object], message: str) -> AfterValidator:
    def check(value: Any) -> Any:
        if not ok(value):
            raise ValueError(message)
        return value

    return AfterValidator(check)


FromCwd = Annotated[Path, AfterValidator(_from_cwd)]
Count = Annotated[int, Field(ge=0)]
AtLeastOne = Annotated[int, Field(ge=0), AfterValidator(lambda n: max(1, n))]  # 0 is taken as 1
Amount = Annotated[float, Field(ge=0)]
Share = Annotated[float, Field(ge=0), AfterValidator(lambda x: min(1.0, x))]  # a larger share is taken as 1
RUNNING = BeforeValidator(
    lambda v: {"running": True, "stopped": False}.get(v.strip().lower(), v) if isinstance(v, str) else v
)
PLAIN_IDENTIFIER = _check(re.compile(r"[A-Za-z_]\w*").fullmatch, IDENTIFIER)
FOR_DBT = Field(json_schema_extra={"dbt": True})  # the dbt process gets it (profiles.yml, macros, dbt-duckdb plugin)


def named(variable: str, default: Any, **extra: Any) -> Any:
    """A field read from ``variable`` rather than its upper-cased name; ``extra`` goes to the JSON schema."""
    return Field(default, validation_alias=variable, json_schema_extra=extra or None)


class Settings(BaseSettings):
    """Resolved platform configuration; a field's docstring is its meaning in docs/settings.md."""

    model_config = SettingsConfigDict(
        frozen=True,
        case_sensitive=True,
        env_ignore_empty=True,
        validate_by_name=True,
        extra="ignore",
        alias_generator=AliasGenerator(validation_alias=str.upper),
        use_attribute_docstrings=True,
    )

    env: Annotated[Literal["local", "prod"], _choice("local")] = named("LOGISTICS_ENV", "local", dbt=True)
    """Environment: `local` (embedded SQLite + files) or `prod` (PostgreSQL + S3)."""
    landing_dir: Annotated[FromCwd, FOR_DBT] = PROJECT_ROOT / "landing"
    """Root of the Kafka Connect landing zone (`topics/<topic>/dt=/hr=`)."""
    catalog_uri: Annotated[str, Field(validate_default=True)] = named(
        "ICEBERG_CATALOG_URI", f"sqlite:///{PROJECT_ROOT}/iceberg_warehouse/catalog.db", dbt=True
    )
    """SQLAlchemy URI of the pyiceberg SQL catalog (PostgreSQL in prod)."""
    warehouse: str = named("ICEBERG_WAREHOUSE", f"file://{PROJECT_ROOT}/iceberg_warehouse", dbt=True)
    """Warehouse root for new Iceberg tables (s3:// in prod)."""
    duckdb_path: Annotated[FromCwd, FOR_DBT] = PROJECT_ROOT / "iceberg_warehouse" / "analytics.duckdb"
    """DuckDB database file that dbt builds into."""
    allowed_lateness_hours: Annotated[Amount, FOR_DBT] = 2.0
    """Allowed lateness L: later events update state but not event-time windows."""
    alert_webhook_url: str | None = None
    """Slack-compatible webhook that receives alerts; unset = local log only."""
    alerts_log: FromCwd = PROJECT_ROOT / ".dagster_home" / "alerts.jsonl"
    """JSON Lines file every alert is appended to."""
    partitions_start: Annotated[str, AfterValidator(lambda key: parse_hour_key(key) and key)] = "2026-11-01-00:00"
    """First arrival-hour partition (Dagster hourly key)."""
    dbt_target: Annotated[str, Field(validate_default=True, json_schema_extra=_DBT_SHOWN)] = ""
    """dbt target in dbt_project/profiles.yml."""
    dbt_threads: Annotated[int, Field(ge=1), FOR_DBT] = 4
    """dbt threads of the `prod` target (the `local` target uses 2)."""
    spark_master: str = "local[*]"
    """Spark master of dbt's `spark` target (`local[*]`, `spark://host:7077`, `k8s://https://...`)."""
    spark_conf_file: FromCwd | None = None
    """Extra Spark settings of dbt's `spark` target (`key value` lines, over ours): a cluster's image, driver host, S3
    (docs/spark.md)."""
    spark_venv: FromCwd = PROJECT_ROOT / ".venv-spark"
    """The venv scripts/spark_env.sh builds (PySpark, dbt-spark, Iceberg's jars) that runs dbt's `spark` target."""
    duckdb_memory_limit: Annotated[str, FOR_DBT] = "8GB"
    """DuckDB memory limit of dbt's `prod` target (DuckDB's syntax)."""
    debezium_decimal_handling_mode: Annotated[Literal["precise", "string", "double"], _choice("precise")] = "precise"
    """The connector's `decimal.handling.mode`: `precise` (base64 Connect Decimal), `string` or `double`; decimal
    strings and JSON numbers are read in every mode."""
    ingest_batch_rows: Count = 200000
    """Rows per Arrow batch / data file written by the bronze ingest."""
    ingest_workers: AtLeastOne = 1
    """Processes parsing a large arrival hour in parallel (1 = in the ingest process)."""
    bronze_freshness_hours: Amount = 2.0
    """Bronze tables older than this fail their freshness check."""
    marts_freshness_hours: Amount = 26.0
    """Marts older than this fail their freshness check."""
    automation_running: Annotated[bool, RUNNING] = named("AUTOMATION_DEFAULT_STATUS", True, shown="running")
    """Initial state of the sensors and schedules in a fresh Dagster instance: `running` or `stopped`."""
    compaction_target_file_bytes: Count = 134217728
    """Target size of compacted data files (128 MiB)."""
    compaction_small_file_bytes: Count = 33554432
    """Files below this size are compaction candidates (32 MiB)."""
    snapshot_retention_days: Amount = 7.0
    """Snapshots older than this are expired (tagged ones are kept)."""
    snapshot_min_keep: Count = 10
    """Expiry always keeps at least this many recent snapshots."""
    orphan_safety_days: Amount = 3.0
    """Unreferenced files younger than this are never deleted (commits in flight)."""
    manifest_max_per_snapshot: Count = 10
    """The nightly run consolidates a snapshot's manifests above this many (each hourly commit adds one, and every
    query plan opens them all)."""
    daily_tag_retention_days: Count = 365
    """How long the `daily-YYYY-MM-DD` tags are kept."""
    s3_endpoint: str | None = named("ICEBERG_S3_ENDPOINT", None, dbt=True)
    """S3-compatible endpoint for the warehouse in prod."""
    s3_access_key_id: str | None = named("ICEBERG_S3_ACCESS_KEY_ID", None, dbt=True)
    """S3 access key id (prod)."""
    s3_secret_access_key: str | None = named("ICEBERG_S3_SECRET_ACCESS_KEY", None, dbt=True)
    """S3 secret key (prod)."""
    s3_region: str | None = named("ICEBERG_S3_REGION", None, dbt=True, shown="us-east-1")
    """S3 region (prod)."""
    oltp_dsn: str | None = None
    """libpq DSN of the OLTP PostgreSQL database that `capture` reads; unset = capture off."""
    capture_slot: str = "logistics_capture"
    """Logical replication slot of `capture` (also names its landing manifest)."""
    capture_publication: str = "logistics_capture"
    """Publication of the contract's tables that the slot decodes."""
    capture_query_overlap_seconds: Amount = 300.0
    """`capture --mode query` re-reads rows this far behind its updated_at watermark (late commits, clock skew)."""
    capture_lag_warn_bytes: Count = 67108864
    """The capture lag check warns when the slot is this many WAL bytes behind."""
    capture_lag_warn_seconds: Amount = 900.0
    """The capture lag check warns when the last capture is this old and behind."""
    capture_wal_retention_alert_bytes: Count = 1073741824
    """Alert when the slot is inactive and keeps more WAL than this on the OLTP server (1 GiB)."""
    publish_max_row_drop: Share = 0.5
    """The publish audit fails a mart (except `late_events`) whose row count would fall by more than this share of
    main's (when main has 100 rows or more); 1 lets any drop through."""
    catalog_name: Annotated[str, PLAIN_IDENTIFIER] = named("ICEBERG_CATALOG_NAME", "logistics", dbt=True)
    """Catalog name in the SQL catalog's rows; Spark/Trino/Flink `JdbcCatalog` readers must use the same name."""
    sla_window_minutes: Annotated[int, _check(lambda m: m > 0 and 60 % m == 0, ALIGNED), FOR_DBT] = 5
    """Width of the event-time windows of marts.fct_region_sla (a divisor of 60)."""
    sla_min_deliveries: Annotated[Count, FOR_DBT] = 20
    """An SLA window breaches only with at least this many deliveries."""
    sla_late_share_max: Annotated[Amount, FOR_DBT] = 0.05
    """An SLA window breaches when its late share exceeds this."""
    gps_jump_kmh: Annotated[Amount, FOR_DBT] = 150.0
    """marts.fct_courier_gps_jumps: consecutive pings implying a higher speed are jumps."""
    off_route_km: Annotated[Amount, FOR_DBT] = 1.0
    """marts.fct_courier_off_route: a ping farther than this from its active order's pickup -> drop-off is off route."""
    off_route_minutes: Annotated[Amount, FOR_DBT] = 5.0
    """marts.fct_courier_off_route: off-route pings spanning at least this many minutes make an episode."""
    ingest_max_hours_per_run: AtLeastOne = 24
    """Most arrival hours one ingest run takes (backfills, `run`, `rebuild`): one Iceberg commit per table for them."""
    live_commit_interval_seconds: Amount = 30.0
    """`landing_sensor` requests the hour in progress again at most this often: files landing in between are committed
    together by the next run (one Iceberg commit per table), so at most about 3600 / this commits per table and hour; a
    new hour or a closed one is requested at once; 0 = at every change (docs/operations.md, "SLA alert latency")."""
    dagster_home: FromCwd | None = named("DAGSTER_HOME", None, shown="(unset; `make` sets .dagster_home)")
    """Dagster's instance directory (its dagster.yaml); `run` uses a throwaway instance when unset."""
    dashboard_port: Annotated[int, Field(ge=1, le=65535)] = 8501
    """Port of the operations dashboard (`make dashboard`), served on 127.0.0.1."""
    dagster_event_batch_size: Count = 1000
    """Dagster writes up to this many asset events of one step in one statement on PostgreSQL storage (0 = one by
    one)."""
    dagster_prune_superseded_after_minutes: Count = 60
    """`prune_superseded_runs` deletes successful runs ended this long ago holding no latest event (0: off)."""

    @field_validator("catalog_uri")
    @classmethod
    def _postgres_in_prod(cls, uri: str, info: Any) -> str:
        if info.data.get("env") == "prod" and uri.startswith("sqlite"):
            raise ValueError(
                "LOGISTICS_ENV=prod needs ICEBERG_CATALOG_URI on PostgreSQL (postgresql+psycopg2://user@host:5432/db); "
                "the SQLite catalog does not take parallel writers"
            )
        return uri

    @field_validator("warehouse")
    @classmethod
    def _resolve_file_warehouse(cls, uri: str) -> str:
        if uri.startswith("file://") and not uri.startswith("file:///"):
            return f"file://{_from_cwd(Path(uri[len('file://') :]))}"
        return uri

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The values given, then the process environment unless :func:`load_settings` was handed a mapping."""
        return (init_settings, env_settings) if _READ_ENVIRONMENT.get() else (init_settings,)

    @field_validator("dbt_target")
    @classmethod
    def _target_of_the_environment(cls, target: str, info: Any) -> str:
        return target or info.data.get("env", "local")

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
    def s3(self) -> dict[str, str]:
        """pyiceberg FileIO property -> value, for the ``ICEBERG_S3_*`` variables that are set."""
        keys = ("endpoint", "access_key_id", "secret_access_key", "region")
        return {f"s3.{k.replace('_', '-')}": v for k in keys if (v := getattr(self, f"s3_{k}"))}

    @property
    def catalog_properties(self) -> dict[str, str]:
        """Properties for pyiceberg's SqlCatalog (and the FileIO behind it)."""
        return {"uri": self.catalog_uri, "warehouse": self.warehouse, **self.s3}

    @property
    def partitions_start_datetime(self) -> datetime:
        return parse_hour_key(self.partitions_start)

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with some fields replaced (tests and CLI flags), validated like the variables."""
        return load_settings({**self.model_dump(), **changes})


# field -> its variable
VARIABLES = {field: str(info.validation_alias) for field, info in Settings.model_fields.items()}


def load_settings(environ: Mapping[str, Any] | None = None) -> Settings:
    """Settings from ``environ`` (default: the process environment; empty = unset); bad values raise SettingsError."""
    token = _READ_ENVIRONMENT.set(environ is None)
    try:
        return Settings.model_validate({k: v for k, v in (environ or {}).items() if v is not None and v != ""})
    except ValidationError as exc:
        problems = []
        for e in exc.errors(include_url=False):
            name = VARIABLES.get(str(e["loc"][0]), str(e["loc"][0])) if e["loc"] else "settings"
            problems.append(f"{name}={e['input']!r}: {e['msg'].removeprefix('Value error, ')}")
        raise SettingsError("; ".join(problems)) from None
    finally:
        _READ_ENVIRONMENT.reset(token)


def local_settings(root: Path, **overrides: object) -> Settings:
    """Settings that keep every piece of state under ``root`` (tests, benchmarks, rebuilds); no variable is read."""
    root = Path(root).resolve()
    return load_settings(
        {
            "landing_dir": root / "landing",
            "catalog_uri": f"sqlite:///{root / 'warehouse' / 'catalog.db'}",
            "warehouse": f"file://{root / 'warehouse'}",
            "duckdb_path": root / "warehouse" / "analytics.duckdb",
            "alerts_log": root / "alerts.jsonl",
            **overrides,
        }
    )


def _shown(prop: dict[str, Any]) -> str:
    if "shown" in prop:
        return str(prop["shown"])
    default = prop.get("default")
    return "(unset)" if default is None else str(default).replace(f"{PROJECT_ROOT}/", "")


# variable -> (default shown to people, meaning): the settings table of docs/settings.md, from the JSON schema.
_SCHEMA = Settings.model_json_schema()["properties"]
SETTINGS_DOC = {name: (_shown(p), " ".join(p["description"].split())) for name, p in _SCHEMA.items()}
# The variables a dbt process gets (when set).
DBT_VARIABLES = frozenset(name for name, p in _SCHEMA.items() if p.get("dbt"))
# Set for every dbt process: no usage tracking (offline operation).
_DBT_TOOL_ENV = {"DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "False"}


def dbt_env(settings: Settings) -> dict[str, str]:
    """The variables declared for dbt that are set (profiles.yml, the macros and the plugin have no defaults)."""
    values = {VARIABLES[field]: value for field, value in settings if value is not None}
    return {**_DBT_TOOL_ENV, **{name: str(value) for name, value in values.items() if name in DBT_VARIABLES}}


def subprocess_env(settings: Settings) -> dict[str, str]:
    """Environment for child processes (dbt, `dagster dev`): the parent's, plus the resolved settings, tracking off."""
    return {**os.environ, **dbt_env(settings)}


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` set in this process's environment inside the block, the previous values restored after it."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.update({name: value for name, value in saved.items() if value is not None})
        for name in [name for name, value in saved.items() if value is None]:
            os.environ.pop(name, None)


_DBT_ENV_LOCK = threading.Lock()


@contextmanager
def dbt_environment(settings: Settings, extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """:func:`dbt_env` (plus ``extra``) in this process's environment around one dbt call at a time (see core.md)."""
    # DuckDB creates its file but not the directory; with an s3:// warehouse nothing else creates it.
    settings.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    with _DBT_ENV_LOCK, environment({**dbt_env(settings), **(extra or {})}):
        yield
