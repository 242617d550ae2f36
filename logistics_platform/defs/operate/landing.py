"""Triggers of the ingest job: the landing sensor (new or changed files) and the hourly reconciling schedule."""

from datetime import UTC, datetime

import dagster as dg

from logistics_platform.defs.constants import INGEST_JOB, TRIGGER_TAG
from logistics_platform.defs.operate.common import ACTIVE_RUN_STATUSES, schedule_status, sensor_status
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.lib.operate import landing_watch as lw
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.settings import Settings


def build_landing_triggers(settings: Settings) -> dg.Definitions:
    """The landing sensor and the hourly ingest schedule."""

    def partitions(hours: dict[str, str]) -> dict[str, str]:
        # From PARTITIONS_START through the hour in progress (ingested as its files land); not a folder ahead of it.
        taken, _ = lw.partition_hours(hours, hour_key(arrival_hour_partitions(settings).start), datetime.now(UTC))
        return {h: hours[h] for h in taken}

    @dg.sensor(
        name="landing_sensor",
        job_name=INGEST_JOB,
        minimum_interval_seconds=5,  # the daemon's floor; a tick lists the lookback's folders, reads no file
        default_status=sensor_status(settings),
        description=(
            "Requests an ingest of an arrival hour when its files appear in LANDING_DIR, the hour in progress "
            "included, and again when its file set changes (a new file in the open hour, a delayed upload); the hour "
            "in progress at most once per LIVE_COMMIT_INTERVAL_SECONDS. Cursor: hour -> fingerprint of the last "
            "requested file set, and when the hour in progress was last requested."
        ),
    )
    def landing_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        scan = lw.scan_landing(settings.landing_dir)
        landed = partitions({hour: lw.combine_fingerprints(topics) for hour, topics in scan.items()})
        now, last = datetime.now(UTC), lw.last_open_request(context.cursor)
        held = lw.held_hour(last, now, settings.live_commit_interval_seconds)
        requests, cursor = lw.plan_ingest_requests(landed, lw.load_cursor(context.cursor), held=held)
        if not requests:
            changed = held is not None and held in landed and landed[held] != cursor.get(held)
            waits = f"; {held} changed, requested after LIVE_COMMIT_INTERVAL_SECONDS" if changed else ""
            return dg.SkipReason(f"{len(landed)} landed hours in the window, none new or changed{waits}")
        tags = {TRIGGER_TAG: "landing_sensor"}
        runs = [
            dg.RunRequest(run_key=r.run_key, tags={**tags, "logistics/reason": r.reason}, partition_key=r.hour)
            for r in requests
        ]
        opened = (hour_key(now), now.timestamp()) if any(r.hour == hour_key(now) for r in requests) else last
        return dg.SensorResult(run_requests=runs, cursor=lw.dump_cursor(cursor, opened))

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

        hours = lw.hours_to_reconcile(context.scheduled_execution_time)
        scan = lw.scan_landing(settings.landing_dir, lookback_days=None, hours=hours)
        ingested = read_ingest_log(catalog_of(settings), hours)
        tick = context.scheduled_execution_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")
        # Single-hour runs and range runs (backfills, `run`) alike: an hour one of them is ingesting is left to it.
        active = context.instance.get_runs(dg.RunsFilter(job_name=INGEST_JOB, statuses=ACTIVE_RUN_STATUSES))
        requests = []
        for hour in hours:
            topics = scan.get(hour, {})
            logged = {t: e.fingerprint for (t, h), e in ingested.items() if h == hour}
            in_flight = any(lw.run_covers_hour(run.tags, hour) for run in active)
            if topics and lw.stale_topics(topics, logged) and partitions({hour: ""}) and not in_flight:
                # Per tick: a stale hour whose run failed is requested again by the next tick.
                key = f"hourly_ingest:{tick}:{lw.ingest_run_key(hour, lw.combine_fingerprints(topics))}"
                requests.append(dg.RunRequest(run_key=key, partition_key=hour, tags={TRIGGER_TAG: "hourly_ingest"}))
        return requests or dg.SkipReason(f"hours {', '.join(hours)}: ingested and unchanged, or nothing landed")

    return dg.Definitions(sensors=[landing_sensor], schedules=[hourly_ingest])
