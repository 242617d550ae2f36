"""Dagster definitions for the maintenance domain: the nightly ``lakehouse_maintenance`` job and table health, and
the hourly prune of Dagster's superseded runs."""

import dagster as dg

from logistics_platform.defs.constants import MAINTENANCE_JOB, MAINTENANCE_WRITER_TAGS
from logistics_platform.defs.maintenance.assets import MAINTENANCE_KEY, iceberg_table_health, iceberg_tables
from logistics_platform.defs.maintenance.run_prune import build_prune
from logistics_platform.defs.operate.common import schedule_status
from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """The maintenance asset and health checks, their nightly job and its schedule; the run prune and its schedule."""
    job = dg.define_asset_job(
        MAINTENANCE_JOB,
        selection=dg.AssetSelection.assets(MAINTENANCE_KEY) | dg.AssetSelection.checks(iceberg_table_health),
        description="Compaction, manifest consolidation, daily tags, snapshot expiry and orphan removal "
        "on every Iceberg table, then table health checks.",
        tags=MAINTENANCE_WRITER_TAGS,
    )
    # Running by default: the job is safe by construction (age windows, validated commits), and a maintenance
    # schedule that someone must remember to switch on is the one that silently lets storage and scan times grow.
    schedule = dg.ScheduleDefinition(
        name="nightly_maintenance_schedule",
        job_name=MAINTENANCE_JOB,
        cron_schedule="0 2 * * *",
        execution_timezone="UTC",
        default_status=schedule_status(settings),
        tags=MAINTENANCE_WRITER_TAGS,
        description="Nightly Iceberg maintenance at 02:00 UTC (after the day's last hourly ingest has landed).",
    )
    tables = dg.Definitions(
        assets=[iceberg_tables], asset_checks=[iceberg_table_health], jobs=[job], schedules=[schedule]
    )
    return dg.Definitions.merge(tables, build_prune(settings))
