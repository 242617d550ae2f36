"""What the operate domain's sensors and schedules share: their default status and how they read runs."""

import dagster as dg

from logistics_platform.lib.operate.landing_watch import PARTITION_TAG, run_partition_bounds
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
    bounds = run_partition_bounds(run.tags)
    if bounds is None:
        return None
    return bounds[0] if PARTITION_TAG in run.tags else f"{bounds[0]}..{bounds[1]}"
