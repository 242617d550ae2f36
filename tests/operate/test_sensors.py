"""Landing sensor, hourly schedule, dbt-after-ingest sensor and run-failure alerts on a real Dagster instance."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from logistics_platform.defs import operate
from logistics_platform.defs.constants import TRANSFORM_JOB
from logistics_platform.defs.operate.alert_sensors import CHECK_HISTORY_LIMIT, deliver_check_alerts
from logistics_platform.defs.operate.transform_sensor import BATCH_TAG, TRANSFORM_ATTEMPTS
from logistics_platform.lib.bronze.landing import hour_dir
from logistics_platform.lib.operate.alerts import read_log
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


def test_transform_sensor_requests_one_range_for_ingested_hours(
    settings: Settings, instance: dg.DagsterInstance
) -> None:
    partitions = dg.HourlyPartitionsDefinition(start_date=settings.partitions_start, timezone="UTC")

    @dg.asset(key=["marts", "fct_orders"], partitions_def=partitions, group_name="marts")
    def fct_orders() -> None:
        """A stand-in partitioned model (the sensor only reads the asset graph and the event log)."""

    defs = dg.Definitions.merge(operate.build_defs(settings), dg.Definitions(assets=[fct_orders]))
    sensor = _sensor(defs, "transform_after_ingest")
    repo = defs.get_repository_def()

    def tick() -> dg.RunRequest | dg.SkipReason:
        return sensor(dg.build_sensor_context(instance=instance, repository_def=repo))

    assert isinstance(tick(), dg.SkipReason)
    for hour in ("2026-11-01-02:00", "2026-11-01-00:00", "2026-11-01-01:00"):
        instance.report_runless_asset_event(dg.AssetMaterialization(["bronze", "ingest_log"], partition=hour))
    request = tick()
    assert isinstance(request, dg.RunRequest)
    assert request.tags["dagster/asset_partition_range_start"] == "2026-11-01-00:00"
    assert request.tags["dagster/asset_partition_range_end"] == "2026-11-01-02:00"

    # A failed dbt run for that batch is retried by the next tick (new run key), up to a limit.
    batch = request.tags[BATCH_TAG]

    def fail_run() -> None:
        instance.add_run(
            dg.DagsterRun(
                job_name=TRANSFORM_JOB,
                run_id=str(uuid.uuid4()),
                status=dg.DagsterRunStatus.FAILURE,
                tags={BATCH_TAG: batch},
            )
        )

    fail_run()
    retry = tick()
    assert isinstance(retry, dg.RunRequest) and retry.run_key != request.run_key
    for _ in range(TRANSFORM_ATTEMPTS - 1):
        fail_run()
    gave_up = tick()
    assert isinstance(gave_up, dg.SkipReason) and "failed 3 times" in (gave_up.skip_message or "")

    # The models get built for those hours: nothing pending any more.
    for hour in ("2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"):
        instance.report_runless_asset_event(dg.AssetMaterialization(["marts", "fct_orders"], partition=hour))
    assert isinstance(tick(), dg.SkipReason)

    # Hour 01 is re-ingested (delayed file): only it is pending, under a new run key.
    instance.report_runless_asset_event(dg.AssetMaterialization(["bronze", "ingest_log"], partition="2026-11-01-01:00"))
    again = tick()
    assert isinstance(again, dg.RunRequest)
    assert again.tags["dagster/asset_partition_range_start"] == "2026-11-01-01:00"
    assert again.tags["dagster/asset_partition_range_end"] == "2026-11-01-01:00"
    assert again.run_key != request.run_key


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
