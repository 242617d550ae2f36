"""Triggers of the ingest job: the landing sensor (new or changed files) and the hourly reconciling schedule.

The decisions live in :mod:`logistics_platform.lib.operate.landing_watch`.
"""

from datetime import UTC, datetime

import dagster as dg

from logistics_platform.defs.constants import INGEST_JOB, TRIGGER_TAG
from logistics_platform.defs.operate.common import ACTIVE_RUN_STATUSES, schedule_status, sensor_status
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.lib.operate.landing_watch import (
    combine_fingerprints,
    dump_cursor,
    hour_fingerprints,
    hours_to_reconcile,
    ingest_run_key,
    load_cursor,
    partition_hours,
    plan_ingest_requests,
    run_covers_hour,
    scan_landing,
    stale_topics,
)
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.settings import Settings


def _valid_hours(settings: Settings, hours: dict[str, str]) -> dict[str, str]:
    """Hours that are partitions now: from PARTITIONS_START through the hour in progress (its files are ingested as
    they land); landed files before PARTITIONS_START are not ingested, an hour folder ahead of the clock not yet."""
    start = hour_key(arrival_hour_partitions(settings).start)
    taken, _ = partition_hours(hours, start, datetime.now(UTC))
    return {h: hours[h] for h in taken}


def build_landing_sensor(settings: Settings) -> dg.SensorDefinition:
    """Requests an ingest of each arrival hour whose landed file set is new or changed."""

    @dg.sensor(
        name="landing_sensor",
        job_name=INGEST_JOB,
        # The daemon's floor: a live file waits at most this long for its ingest; a tick lists the landing folders of
        # the lookback window and compares fingerprints (no file is read).
        minimum_interval_seconds=5,
        default_status=sensor_status(settings),
        description=(
            "Requests an ingest of an arrival hour when its files appear in LANDING_DIR, the hour in progress "
            "included, and again when its file set changes (a new file in the open hour, a delayed upload). "
            "Cursor: hour -> fingerprint of the last requested file set."
        ),
    )
    def landing_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        landed = _valid_hours(settings, hour_fingerprints(scan_landing(settings.landing_dir)))
        requests, cursor = plan_ingest_requests(landed, load_cursor(context.cursor))
        if not requests:
            return dg.SkipReason(f"{len(landed)} landed hours in the window, none new or changed")
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=r.run_key,
                    partition_key=r.hour,
                    tags={TRIGGER_TAG: "landing_sensor", "logistics/reason": r.reason},
                )
                for r in requests
            ],
            cursor=dump_cursor(cursor),
        )

    return landing_sensor


def build_hourly_ingest_schedule(settings: Settings) -> dg.ScheduleDefinition:
    """Re-ingests the last two closed hours when bronze.ingest_log says they are missing or stale."""

    @dg.schedule(
        name="hourly_ingest",
        cron_schedule="5 * * * *",
        execution_timezone="UTC",
        job_name=INGEST_JOB,
        default_status=schedule_status(settings),
        description=(
            "At :05 each hour, re-checks the hour that just closed and the one before it against "
            "bronze.ingest_log and ingests any hour never ingested or whose files changed (late uploads)."
        ),
    )
    def hourly_ingest(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        from logistics_platform.lib.connections import catalog_of
        from logistics_platform.lib.operate.progress import read_ingest_log

        hours = hours_to_reconcile(context.scheduled_execution_time)
        scan = scan_landing(settings.landing_dir, lookback_days=None, hours=hours)
        ingested = read_ingest_log(catalog_of(settings), hours)
        requests = []
        tick = context.scheduled_execution_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")
        # Single-hour runs and range runs (backfills, `run`) alike: an hour one of them is ingesting is left to it.
        active = context.instance.get_runs(dg.RunsFilter(job_name=INGEST_JOB, statuses=ACTIVE_RUN_STATUSES))
        for hour in hours:
            topics = scan.get(hour, {})
            logged = {t: e.fingerprint for (t, h), e in ingested.items() if h == hour}
            in_flight = any(run_covers_hour(run.tags, hour) for run in active)
            if topics and stale_topics(topics, logged) and _valid_hours(settings, {hour: ""}) and not in_flight:
                fp = combine_fingerprints(topics)
                requests.append(
                    dg.RunRequest(
                        # Per tick: a stale hour whose run failed is requested again by the next tick.
                        run_key=f"hourly_ingest:{tick}:{ingest_run_key(hour, fp)}",
                        partition_key=hour,
                        tags={TRIGGER_TAG: "hourly_ingest"},
                    )
                )
        return requests or dg.SkipReason(f"hours {', '.join(hours)}: ingested and unchanged, or nothing landed")

    return hourly_ingest


def build_landing_triggers(settings: Settings) -> dg.Definitions:
    """The landing sensor and the hourly ingest schedule."""
    return dg.Definitions(sensors=[build_landing_sensor(settings)], schedules=[build_hourly_ingest_schedule(settings)])
