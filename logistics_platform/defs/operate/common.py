"""What the operate domain's sensors and schedules share: their default status and how they read runs."""

import dagster as dg

from logistics_platform.lib.operate.landing_watch import PARTITION_TAG, run_partition_bounds
from logistics_platform.lib.transform.arrival_window import WINDOW_END_TAG, WINDOW_START_TAG
from logistics_platform.settings import Settings

# A run in these states has not started its step: a dbt run there reads every ingest committed so far.
NOT_YET_READING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]
# A run in one of these states still holds its partition (or the DuckDB file): sensors wait for it.
ACTIVE_RUN_STATUSES = [*NOT_YET_READING, dg.DagsterRunStatus.STARTED]


def sensor_status(settings: Settings) -> dg.DefaultSensorStatus:
    """Running or stopped in a fresh instance, per ``AUTOMATION_DEFAULT_STATUS``."""
    return dg.DefaultSensorStatus.RUNNING if settings.automation_running else dg.DefaultSensorStatus.STOPPED


def schedule_status(settings: Settings) -> dg.DefaultScheduleStatus:
    """Running or stopped in a fresh instance, per ``AUTOMATION_DEFAULT_STATUS``."""
    return dg.DefaultScheduleStatus.RUNNING if settings.automation_running else dg.DefaultScheduleStatus.STOPPED


def run_partition(run: dg.DagsterRun) -> str | None:
    """What to re-run: the partition key of a run, or ``first..last`` of a range; then a transform run's arrival hours,
    e.g. ``2026-11-30 (arrival hours 2026-11-30-03:00..2026-11-30-04:00)``."""
    if (bounds := run_partition_bounds(run.tags)) is None:
        return None
    label = bounds[0] if PARTITION_TAG in run.tags else f"{bounds[0]}..{bounds[1]}"
    first, last = run.tags.get(WINDOW_START_TAG), run.tags.get(WINDOW_END_TAG)
    if first and last:
        label += f" (arrival hours {first if first == last else f'{first}..{last}'})"
    return label
