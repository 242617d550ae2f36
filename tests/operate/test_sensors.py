"""Landing sensor, hourly schedule, dbt-after-ingest sensor and run-failure alerts on a real Dagster instance."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg

from logistics_platform.defs import operate
from logistics_platform.defs.constants import TRANSFORM_JOB
from logistics_platform.defs.operate.alert_sensors import CHECK_HISTORY_LIMIT, deliver_check_alerts
from logistics_platform.defs.operate.transform_sensor import BATCH_TAG, TRANSFORM_ATTEMPTS, pending_transform_hours
from logistics_platform.defs.partitions import arrival_day_partitions, arrival_hour_partitions
from logistics_platform.defs.transform.assets import ingest_watermark
from logistics_platform.lib.bronze.landing import hour_dir
from logistics_platform.lib.operate.alerts import read_log
from logistics_platform.lib.operate.transform_pending import WATERMARK_TAG
from logistics_platform.lib.timekeys import hour_key, hour_start
from logistics_platform.lib.transform.arrival_window import WINDOW_END_TAG, WINDOW_START_TAG, ArrivalWindow
from logistics_platform.settings import Settings, local_settings

ORDERS = "oltp.public.orders"
PINGS = "logistics.tracking_pings"


def land(settings: Settings, topic: str, hour: datetime, offset: int, n: int = 2) -> Path:
    """A landing file of ``n`` lines (content is irrelevant to discovery: only names and sizes count)."""
    folder = settings.landing_dir / hour_dir(topic, hour)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topic}+0+{offset:010d}.json"
    path.write_text("".join(json.dumps({"n": offset + i}) + "\n" for i in range(n)))
    return path


def _sensor(defs: dg.Definitions, name: str) -> dg.SensorDefinition:
    return defs.get_repository_def().get_sensor_def(name)


def test_landing_sensor_new_hour_unchanged_hour_and_delayed_file(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    sensor = _sensor(operate.build_defs(settings), "landing_sensor")
    h0, h1 = datetime(2026, 11, 1, 0), datetime(2026, 11, 1, 1)
    land(settings, ORDERS, h0, 0)
    land(settings, PINGS, h0, 0)

    first = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(first, dg.SensorResult)
    assert [r.partition_key for r in first.run_requests] == ["2026-11-01-00:00"]
    assert first.run_requests[0].tags["logistics/reason"] == "new"

    # Nothing changed: no request at all (and the cursor is kept).
    same = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
    assert isinstance(same, dg.SkipReason)

    # A new hour appears: only that hour is requested.
    land(settings, ORDERS, h1, 2)
    second = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
    assert [r.partition_key for r in second.run_requests] == ["2026-11-01-01:00"]

    # A delayed upload into the already-requested first hour: requested again, under a new run key.
    land(settings, ORDERS, h0, 100)
    third = sensor(dg.build_sensor_context(instance=instance, cursor=second.cursor))
    assert [(r.partition_key, r.tags["logistics/reason"]) for r in third.run_requests] == [
        ("2026-11-01-00:00", "changed")
    ]
    assert third.run_requests[0].run_key != first.run_requests[0].run_key
    assert isinstance(sensor(dg.build_sensor_context(instance=instance, cursor=third.cursor)), dg.SkipReason)


def test_landing_sensor_ignores_hours_before_partitions_start(settings: Settings, instance: dg.DagsterInstance) -> None:
    sensor = _sensor(operate.build_defs(settings), "landing_sensor")
    land(settings, ORDERS, datetime(2026, 10, 31, 23), 0)
    assert isinstance(sensor(dg.build_sensor_context(instance=instance)), dg.SkipReason)


def test_landing_sensor_requests_the_hour_in_progress(settings: Settings, instance: dg.DagsterInstance) -> None:
    sensor = _sensor(operate.build_defs(settings), "landing_sensor")
    now = datetime.now(UTC)
    land(settings, ORDERS, now, 0)  # a live sink writing into the open hour
    land(settings, ORDERS, now + timedelta(hours=2), 0)  # a folder ahead of this host's clock: not a partition yet
    result = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(result, dg.SensorResult)
    [request] = result.run_requests
    # The current hour, unless it closed while the sensor ran (then it is the hour just closed): a partition either way.
    assert request.partition_key in (hour_key(now), hour_key(datetime.now(UTC)))
    assert arrival_hour_partitions(settings).has_partition_key(request.partition_key)


def test_landing_sensor_coalesces_the_hour_in_progress_over_the_commit_interval(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    settings = local_settings(tmp_path, live_commit_interval_seconds=3600)
    sensor = _sensor(operate.build_defs(settings), "landing_sensor")
    now = datetime.now(UTC)
    if now.minute == 59 and now.second >= 30:  # the test's ticks must fall in one clock hour
        time.sleep(61 - now.second)
        now = datetime.now(UTC)
    hour = hour_start(now)
    land(settings, ORDERS, hour, 0)
    first = sensor(dg.build_sensor_context(instance=instance))
    assert isinstance(first, dg.SensorResult)
    assert [(r.partition_key, r.tags["logistics/reason"]) for r in first.run_requests] == [(hour_key(hour), "new")]

    # Files landing in the hour in progress within the interval wait; the skip says why.
    land(settings, ORDERS, hour, 10)
    land(settings, PINGS, hour, 0)
    held = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
    assert isinstance(held, dg.SkipReason) and "LIVE_COMMIT_INTERVAL_SECONDS" in (held.skip_message or "")
    # A closed hour is not held: its late file is requested at once, the open hour still waits.
    land(settings, ORDERS, hour - timedelta(hours=1), 0)
    late = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
    assert isinstance(late, dg.SensorResult)
    assert [r.partition_key for r in late.run_requests] == [hour_key(hour - timedelta(hours=1))]

    # The interval is over (the hour's last request an interval ago): one request for everything landed since.
    cursor = json.loads(late.cursor or "")
    cursor["open"][1] -= 3600
    over = sensor(dg.build_sensor_context(instance=instance, cursor=json.dumps(cursor)))
    assert isinstance(over, dg.SensorResult)
    [request] = over.run_requests
    assert (request.partition_key, request.tags["logistics/reason"]) == (hour_key(hour), "changed")
    assert request.run_key != first.run_requests[0].run_key
    assert isinstance(sensor(dg.build_sensor_context(instance=instance, cursor=over.cursor)), dg.SkipReason)

    # LIVE_COMMIT_INTERVAL_SECONDS=0: every change of the hour in progress is requested at once.
    every = _sensor(operate.build_defs(settings.with_overrides(live_commit_interval_seconds=0)), "landing_sensor")
    land(settings, PINGS, hour, 10)
    assert isinstance(every(dg.build_sensor_context(instance=instance, cursor=over.cursor)), dg.SensorResult)


def test_hourly_schedule_requests_closed_hour_and_previous(settings: Settings, instance: dg.DagsterInstance) -> None:
    defs = operate.build_defs(settings)
    schedule = defs.get_repository_def().get_schedule_def("hourly_ingest")
    for hour in (1, 2, 3):
        land(settings, ORDERS, datetime(2026, 11, 1, hour), hour * 10)
    tick = datetime(2026, 11, 1, 3, 5, tzinfo=UTC)
    ctx = dg.build_schedule_context(instance=instance, scheduled_execution_time=tick)
    requests = schedule(ctx)
    assert isinstance(requests, list)
    # 03:00 is still open at 03:05; 02:00 just closed and 01:00 catches late uploads.
    assert sorted(r.partition_key for r in requests) == ["2026-11-01-01:00", "2026-11-01-02:00"]
    assert all(r.run_key and r.run_key.startswith("hourly_ingest:2026-11-01T03:05:ingest:") for r in requests)

    later = datetime(2026, 11, 5, 0, 5, tzinfo=UTC)
    skipped = schedule(dg.build_schedule_context(instance=instance, scheduled_execution_time=later))
    assert isinstance(skipped, dg.SkipReason)


def test_transform_sensor_requests_the_window_of_hours_ingested_since_a_run_built_them(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    @dg.asset(key=["marts", "fct_orders"], partitions_def=arrival_day_partitions(settings), group_name="marts")
    def fct_orders() -> None:
        """A stand-in model partitioned like the dbt layer (the sensor reads the asset graph and Dagster's records)."""

    defs = dg.Definitions.merge(operate.build_defs(settings), dg.Definitions(assets=[fct_orders]))
    sensor = _sensor(defs, "transform_after_ingest")
    repo = defs.get_repository_def()
    cursor: list[str | None] = [None]

    def tick() -> dg.RunRequest | dg.SkipReason:
        context = dg.build_sensor_context(instance=instance, repository_def=repo, cursor=cursor[0])
        result = sensor(context)
        cursor[0] = context.cursor
        return result

    def ingest(hour: str) -> None:
        instance.report_runless_asset_event(dg.AssetMaterialization(["bronze", "ingest_log"], partition=hour))

    def transform_run(request: dg.RunRequest, status: dg.DagsterRunStatus, watermark: int | None = None) -> None:
        """A run of the request, as the dbt step leaves it: tagged with its ingest watermark when it built it."""
        tags = {**(request.tags or {}), **({WATERMARK_TAG: str(watermark)} if watermark is not None else {})}
        instance.add_run(dg.DagsterRun(job_name=TRANSFORM_JOB, run_id=str(uuid.uuid4()), status=status, tags=tags))

    assert isinstance(tick(), dg.SkipReason)
    for hour in ("2026-11-01-23:00", "2026-11-01-21:00", "2026-11-01-22:00"):
        ingest(hour)
    request = tick()
    assert isinstance(request, dg.RunRequest)
    # The days of the hours are the run's partitions; the hours are its window.
    assert request.tags["dagster/asset_partition_range_start"] == "2026-11-01"
    assert request.tags["dagster/asset_partition_range_end"] == "2026-11-01"
    assert request.tags[WINDOW_START_TAG] == "2026-11-01-21:00"
    assert request.tags[WINDOW_END_TAG] == "2026-11-01-23:00"

    # A failed dbt run for that batch is retried by the next tick (new run key), up to a limit.
    batch = request.tags[BATCH_TAG]
    transform_run(request, dg.DagsterRunStatus.FAILURE)
    retry = tick()
    assert isinstance(retry, dg.RunRequest) and retry.run_key != request.run_key
    for _ in range(TRANSFORM_ATTEMPTS - 1):
        transform_run(request, dg.DagsterRunStatus.FAILURE)
    gave_up = tick()
    assert isinstance(gave_up, dg.SkipReason) and "failed 3 times" in (gave_up.skip_message or "")
    assert len(instance.get_runs(dg.RunsFilter(tags={BATCH_TAG: batch}))) == TRANSFORM_ATTEMPTS

    # While a run is in flight, the sensor waits for it.
    transform_run(request, dg.DagsterRunStatus.STARTED)
    in_flight = tick()
    assert isinstance(in_flight, dg.SkipReason) and "in flight" in (in_flight.skip_message or "")
    instance.delete_run(instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))[0].run_id)

    # The run's dbt step read its watermark, then hour 22 was re-ingested (a delayed file) and hour 00 of the next
    # day ingested before it finished: only those two are pending, under a new batch spanning both days.
    watermark = ingest_watermark(instance)
    ingest("2026-11-01-22:00")
    ingest("2026-11-02-00:00")
    transform_run(request, dg.DagsterRunStatus.SUCCESS, watermark)
    again = tick()
    assert isinstance(again, dg.RunRequest)
    assert (again.tags[WINDOW_START_TAG], again.tags[WINDOW_END_TAG]) == ("2026-11-01-22:00", "2026-11-02-00:00")
    assert again.tags["dagster/asset_partition_range_end"] == "2026-11-02"
    assert again.tags["logistics/pending_hours"] == "2" and again.run_key != request.run_key

    # A successful run that built a subset of the models carries no watermark: it builds nothing for the sensor.
    transform_run(again, dg.DagsterRunStatus.SUCCESS)
    assert isinstance(tick(), dg.RunRequest)
    transform_run(again, dg.DagsterRunStatus.SUCCESS, ingest_watermark(instance))
    done = tick()
    assert isinstance(done, dg.SkipReason) and "every ingested hour is built" in (done.skip_message or "")
    # Without its cursor (a reset sensor), the same state is rebuilt from the runs.
    cursor[0] = None
    assert isinstance(tick(), dg.SkipReason)


def test_run_failure_sensor_alerts_with_run_asset_partition_and_error(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    partitions = dg.HourlyPartitionsDefinition(start_date=settings.partitions_start, timezone="UTC")

    @dg.asset(key=["bronze", "orders"], partitions_def=partitions)
    def orders() -> None:
        """Fails like an ingest that cannot read its input."""
        raise OSError("landing file vanished: topics/oltp.public.orders/dt=2026-11-01/hr=04")

    job = dg.define_asset_job("failing_ingest", selection=[orders], partitions_def=partitions)
    defs = dg.Definitions(assets=[orders], jobs=[job])
    result = defs.resolve_job_def("failing_ingest").execute_in_process(
        instance=instance, partition_key="2026-11-01-04:00", raise_on_error=False
    )
    assert not result.success
    run = instance.get_run_by_id(result.run_id)
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
    sensor = _sensor(operate.build_defs(settings), "alert_on_run_failure")
    ctx = dg.build_run_status_sensor_context(
        sensor_name="alert_on_run_failure", dagster_event=failure, dagster_instance=instance, dagster_run=run
    )
    sensor(ctx.for_run_failure())
    [alert] = read_log(settings.alerts_log)
    assert alert["run_id"] == result.run_id
    assert alert["assets"] == ["bronze/orders"]
    assert alert["partition"] == "2026-11-01-04:00"
    assert "landing file vanished" in alert["error"]
    assert result.run_id in alert["message"]["text"]


def test_check_alerts_take_the_newest_failures_past_the_cursor(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    key = dg.AssetCheckKey(dg.AssetKey(["bronze", "orders"]), "accounting")
    warn = dg.AssetCheckKey(dg.AssetKey(["bronze", "orders"]), "schema_stable")

    def evaluate(check: dg.AssetCheckKey, passed: bool, n: int, severity: dg.AssetCheckSeverity) -> None:
        evaluation = dg.AssetCheckEvaluation(
            asset_key=check.asset_key, check_name=check.name, passed=passed, severity=severity, description=f"#{n}"
        )
        instance.report_runless_asset_event(evaluation)

    # More failures than one tick alerts on, each followed by a pass: the history is paged past the passes.
    for n in range(CHECK_HISTORY_LIMIT + 10):
        evaluate(key, False, n, dg.AssetCheckSeverity.ERROR)
        evaluate(key, True, n, dg.AssetCheckSeverity.ERROR)
    evaluate(warn, False, 0, dg.AssetCheckSeverity.WARN)  # a failed warning: no alert
    sent, cursor = deliver_check_alerts(instance, [key, warn], None, settings)
    alerts = read_log(settings.alerts_log)
    assert sent == CHECK_HISTORY_LIMIT == len(alerts)
    assert [a["error"] for a in alerts] == [f"#{n}" for n in range(10, CHECK_HISTORY_LIMIT + 10)]  # oldest first

    # Next tick: only what failed since, however many passes came after it.
    evaluate(key, False, 1000, dg.AssetCheckSeverity.ERROR)
    for n in range(2 * CHECK_HISTORY_LIMIT):
        evaluate(key, True, n, dg.AssetCheckSeverity.ERROR)
    sent, cursor = deliver_check_alerts(instance, [key, warn], cursor, settings)
    assert sent == 1 and read_log(settings.alerts_log)[-1]["error"] == "#1000"
    assert deliver_check_alerts(instance, [key, warn], cursor, settings) == (0, cursor)


def test_automation_can_start_stopped(tmp_path: Path) -> None:
    running = operate.build_defs(local_settings(tmp_path))
    stopped = operate.build_defs(local_settings(tmp_path, automation_running=False))
    assert _sensor(running, "landing_sensor").default_status == dg.DefaultSensorStatus.RUNNING
    assert _sensor(stopped, "landing_sensor").default_status == dg.DefaultSensorStatus.STOPPED
    schedule = stopped.get_repository_def().get_schedule_def("hourly_ingest")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


def test_run_takes_the_pending_hours_of_recent_ingests_only_and_none_when_nothing_was_ingested_lately(
    instance: dg.DagsterInstance,
) -> None:
    assert pending_transform_hours(instance, None, within_days=7)[0] == {}  # no ingest: none waits (not "all")
    for hour in ("2026-11-01-21:00", "2026-11-01-22:00"):
        instance.report_runless_asset_event(dg.AssetMaterialization(["bronze", "ingest_log"], partition=hour))
    built = {**ArrivalWindow.of_hours("2026-11-01-21:00", "2026-11-01-21:00").run_tags()}
    built[WATERMARK_TAG] = str(ingest_watermark(instance))
    instance.add_run(
        dg.DagsterRun(job_name=TRANSFORM_JOB, run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.SUCCESS, tags=built)
    )
    pending = pending_transform_hours(instance, None, within_days=7)[0]
    assert list(pending) == ["2026-11-01-22:00"] and pending == pending_transform_hours(instance, None)[0]
    # An hour ingested before the days looked at is left out, and with it the runs before them.
    time.sleep(0.05)
    assert pending_transform_hours(instance, None, within_days=0.01 / 86_400)[0] == {}
