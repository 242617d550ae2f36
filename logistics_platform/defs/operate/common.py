"""What the operate domain's sensors and schedules share: their default status and how they read runs."""

import dagster as dg

from logistics_platform.settings import Settings

# A run in one of these states still holds its partition (or the DuckDB file): sensors wait for it.
ACTIVE_RUN_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def sensor_status(settings: Settings) -> dg.DefaultSensorStatus:
    """Running or stopped in a fresh instance, per ``AUTOMATION_DEFAULT_STATUS``."""
    return dg.DefaultSensorStatus.RUNNING if settings.automation_running else dg.DefaultSensorStatus.STOPPED


def schedule_status(settings: Settings) -> dg.DefaultScheduleStatus:
    """Running or stopped in a fresh instance, per ``AUTOMATION_DEFAULT_STATUS``."""
    return dg.DefaultScheduleStatus.RUNNING if settings.automation_running else dg.DefaultScheduleStatus.STOPPED


def run_partition(run: dg.DagsterRun) -> str | None:
    """The partition key of a run, or ``first..last`` for a partition-range run."""
    tags = run.tags
    if "dagster/partition" in tags:
        return tags["dagster/partition"]
    lo, hi = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
    return f"{lo}..{hi}" if lo and hi else None
