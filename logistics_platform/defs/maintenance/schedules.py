"""When maintenance runs: nightly, after the day's last hourly ingest."""

import dagster as dg

from logistics_platform.defs.constants import MAINTENANCE_JOB, MAINTENANCE_WRITER_TAGS
from logistics_platform.settings import Settings


def build_nightly_schedule(settings: Settings) -> dg.ScheduleDefinition:
    """The nightly schedule of the maintenance job."""
    # Running by default: the job is safe by construction (age windows, validated commits), and a maintenance
    # schedule that someone must remember to switch on is the one that silently lets storage and scan times grow.
    return dg.ScheduleDefinition(
        name="nightly_maintenance_schedule",
        job_name=MAINTENANCE_JOB,
        cron_schedule="0 2 * * *",
        execution_timezone="UTC",
        default_status=(
            dg.DefaultScheduleStatus.RUNNING if settings.automation_running else dg.DefaultScheduleStatus.STOPPED
        ),
        tags=MAINTENANCE_WRITER_TAGS,
        description="Nightly Iceberg maintenance at 02:00 UTC (after the day's last hourly ingest has landed).",
    )
