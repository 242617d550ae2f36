"""Names another Dagster domain or the CLI refers to (jobs, groups, keys, tags, pools): no domain imports another."""

import dagster as dg

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.transform.operations import OFF_ROUTE_CHECK, OFF_ROUTE_MART, SLA_CHECK, SLA_MART
from logistics_platform.lib.transform.project import MART_MODELS

OWNERS = ["team:data-platform"]

# Jobs that the CLI, sensors and schedules launch by name.
INGEST_JOB = "ingest_arrival_hours"
TRANSFORM_JOB = "transform_arrival_hours"
MAINTENANCE_JOB = "lakehouse_maintenance"

# Asset groups: bronze, the dbt layers, and the groups `logistics-platform run` leaves alone.
BRONZE_GROUP = "bronze"
TRANSFORM_GROUPS = ("staging", "intermediate", "marts")
MAINTENANCE_GROUP = "maintenance"
LANDING_GROUP = "landing"
CAPTURE_GROUP = "capture"

# Bronze: one table per topic, plus quarantine and the ingest log.
BRONZE_DATA_TABLES = tuple(bs.TOPICS)
BRONZE_TABLES = (*bs.TOPICS, bs.QUARANTINE_TABLE, bs.INGEST_LOG_TABLE)
INGEST_LOG_KEY = dg.AssetKey(["bronze", bs.INGEST_LOG_TABLE])

# Marts: built by dbt in DuckDB (["marts", m]) and published to the Iceberg namespace `marts` (["iceberg_marts", m]).
MARTS = MART_MODELS
PUBLISHED_PREFIX = "iceberg_marts"
PUBLISHED_KEYS: dict[str, dg.AssetKey] = {m: dg.AssetKey([PUBLISHED_PREFIX, m]) for m in MART_MODELS}
# The live marts (sensor in operate, checks in transform) and the one check of each that alerts from its run.
SLA_KEY = dg.AssetKey(["marts", SLA_MART])
OFF_ROUTE_KEY = dg.AssetKey(["marts", OFF_ROUTE_MART])
LIVE_CHECKS = [dg.AssetCheckKey(SLA_KEY, SLA_CHECK), dg.AssetCheckKey(OFF_ROUTE_KEY, OFF_ROUTE_CHECK)]

# Iceberg table -> the asset whose table-health check reports it.
HEALTH_CHECK = "iceberg_table_health"
CHECKED_TABLES: dict[str, dg.AssetKey] = {
    **{f"bronze.{t}": dg.AssetKey(["bronze", t]) for t in BRONZE_TABLES},
    **{f"marts.{m}": key for m, key in PUBLISHED_KEYS.items()},
}

# Single writers (the DuckDB file, maintenance): tags feed the run queue's limits, pools the step-level ones.
DUCKDB_WRITER_TAGS = {"logistics/writer": "duckdb"}
MAINTENANCE_WRITER_TAGS = {"logistics/writer": "maintenance"}
DUCKDB_POOL = "duckdb"
MAINTENANCE_POOL = "maintenance"

TRIGGER_TAG = "logistics/trigger"
