"""The live path: a file landed in the hour in progress (real clock) -> the landing sensor's ingest -> the live
sensor's transform run of the SLA and off-route marts -> their checks post the alert (an off-route episode once, though
later runs rebuild it); the full transform still follows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.definitions import build_definitions
from logistics_platform.defs.constants import INGEST_JOB, LIVE_CHECKS, OFF_ROUTE_KEY, SLA_KEY, TRANSFORM_JOB
from logistics_platform.defs.operate.alert_sensors import deliver_check_alerts
from logistics_platform.defs.operate.transform_sensor import LIVE_SENSOR
from logistics_platform.lib.operate.alerts import DELIVERED_KEY, read_log
from logistics_platform.lib.operate.transform_pending import LIVE_HOURS, WATERMARK_TAG, live_batch, live_cursor
from logistics_platform.lib.timekeys import hour_key, hour_start
from logistics_platform.lib.transform.operations import OFF_ROUTE_CHECK, SLA_CHECK
from logistics_platform.pipeline import QUIET
from logistics_platform.settings import local_settings
from tests.support.bronze import cdc, dump, iso, ping, write_file
from tests.support.dashboard_world import CORRIDOR, DETOUR_LON, OFF_COURIER, OFF_ORDER, land_off_route
from tests.support.http import Webhook
from tests.support.live import window_deliveries

ORDERS = "oltp.public.orders"


def test_live_batch_takes_the_live_hours_ingested_since_the_cursor() -> None:
    now = datetime(2026, 12, 1, 22, 40)
    ingested = {"2026-12-01-20:00": 5, "2026-12-01-21:00": 7, "2026-12-01-22:00": 9}
    batch, cursor = live_batch(ingested, 6, now)
    assert LIVE_HOURS == 2 and batch is not None
    assert batch.hours == ("2026-12-01-21:00", "2026-12-01-22:00") and batch.watermark == 9 and cursor == 9
    # Nothing new: no batch, the cursor stays.
    assert live_batch(ingested, 9, now) == (None, 9)
    # An old hour re-ingested is the full batch's work, but moves the cursor past it.
    assert live_batch({**ingested, "2026-12-01-20:00": 12}, 9, now) == (None, 12)
    assert batch.run_key == "sla_live:2026-12-01-21:00..2026-12-01-22:00:9"
    assert live_cursor(None) == 0 and live_cursor("x") == 0 and live_cursor("12") == 12


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance, name: str, cursor: str | None = None) -> dg.SensorResult:
    sensor = defs.get_repository_def().get_sensor_def(name)
    context = dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor)
    data = sensor.evaluate_tick(context)
    return dg.SensorResult(run_requests=data.run_requests, cursor=data.cursor, skip_reason=data.skip_message)


@pytest.mark.slow
def test_a_breach_landed_in_the_open_hour_is_alerted_by_the_live_run(
    tmp_path: Path, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    now = datetime.now(UTC)
    open_hour = hour_start(now)
    settings = local_settings(
        tmp_path, partitions_start=hour_key(open_hour - timedelta(days=1)), alert_webhook_url=webhook.url
    )
    defs = build_definitions(settings)
    # A window that closed half an hour ago: north, 24 deliveries all after their promise, as a sink writes them.
    window = open_hour + timedelta(minutes=(now.minute // 5) * 5) - timedelta(minutes=30)
    write_file(settings.landing_dir, ORDERS, open_hour, 0, 0, window_deliveries(window, "north", 5000, 24, True, 100))

    landing = _tick(defs, instance, "landing_sensor")
    [ingest] = landing.run_requests or []
    assert ingest.partition_key == hour_key(open_hour)
    job = defs.resolve_job_def(INGEST_JOB)
    assert job.execute_in_process(
        run_config=QUIET, instance=instance, partition_key=ingest.partition_key, tags=ingest.tags
    ).success

    live = _tick(defs, instance, LIVE_SENSOR)
    [request] = live.run_requests or []
    assert request.tags["logistics/arrival_hours_end"] == hour_key(open_hour)
    selected = set(request.asset_selection or [])
    assert SLA_KEY in selected and dg.AssetKey(["marts", "fct_daily_revenue"]) not in selected
    # The sets of keys and windows the SLA mart reads are its ancestors: the run rebuilds them for its hours.
    assert {dg.AssetKey(["intermediate", f"int_affected_{s}"]) for s in ("order_ids", "sla_windows")} <= selected
    assert list(request.asset_check_keys or []) == LIVE_CHECKS  # the SLA check and the off-route one
    subset = defs.resolve_job_def(TRANSFORM_JOB).get_subset(
        asset_selection=selected, asset_check_selection=set(request.asset_check_keys or [])
    )
    result = subset.execute_in_process(run_config=QUIET, instance=instance, tags=request.tags)
    assert result.success
    assert {e.asset_key for e in result.get_asset_materialization_events()} <= selected
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == SLA_CHECK]
    assert not evaluation.passed and evaluation.metadata[DELIVERED_KEY].value is True

    # The run posted the alert itself; the check-alert sensor does not send it again.
    [posted] = webhook.bodies
    assert SLA_CHECK in posted["text"] and "north" in posted["text"] and "24/24 late" in posted["text"]
    assert [a["check_name"] for a in read_log(settings.alerts_log)] == [SLA_CHECK]
    check_keys = list(defs.resolve_asset_graph().asset_check_keys)
    assert deliver_check_alerts(instance, check_keys, None, settings)[0] == 0

    # A subset run leaves no ingest watermark: the full transform still asks for the open hour, and the live sensor
    # has nothing new on its next tick.
    assert WATERMARK_TAG not in instance.get_run_by_id(result.run_id).tags
    [full] = _tick(defs, instance, "transform_after_ingest").run_requests or []
    assert full.tags["logistics/arrival_hours_end"] == hour_key(open_hour) and not full.asset_selection
    assert not _tick(defs, instance, LIVE_SENSOR, live.cursor).run_requests


def _run_request(
    defs: dg.Definitions, instance: dg.DagsterInstance, request: dg.RunRequest
) -> dg.ExecuteInProcessResult:
    """Execute ``request`` of the transform job as the daemon would launch it (its assets, checks and tags)."""
    job = defs.resolve_job_def(TRANSFORM_JOB)
    if request.asset_selection:
        job = job.get_subset(
            asset_selection=set(request.asset_selection), asset_check_selection=set(request.asset_check_keys or [])
        )
    result = job.execute_in_process(run_config=QUIET, instance=instance, tags=request.tags)
    assert result.success
    return result


def _ingest(defs: dg.Definitions, instance: dg.DagsterInstance, cursor: str | None) -> str | None:
    """One landing_sensor tick and the ingest run it requests; the sensor's next cursor."""
    landing = _tick(defs, instance, "landing_sensor", cursor)
    [ingest] = landing.run_requests or []
    job = defs.resolve_job_def(INGEST_JOB)
    run = job.execute_in_process(
        run_config=QUIET, instance=instance, partition_key=ingest.partition_key, tags=ingest.tags
    )
    assert run.success
    return landing.cursor


@pytest.mark.slow
def test_an_off_route_episode_landed_live_is_alerted_once_by_the_live_run(
    tmp_path: Path, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    now = datetime.now(UTC).replace(tzinfo=None)
    settings = local_settings(
        tmp_path,
        partitions_start=hour_key(hour_start(now) - timedelta(days=1)),
        alert_webhook_url=webhook.url,
        live_commit_interval_seconds=0,  # the second file is requested at once, not after the interval
    )
    defs = build_definitions(settings)
    # Half an hour ago the courier left the corridor (its order in transit), as the sink lands pings and order; the
    # order's tenant (the full transform's tests look it up).
    then = now - timedelta(minutes=30)
    started = land_off_route(settings.landing_dir, then)
    tenant = {"tenant_id": "t-001", "name": "T1", "tier": "silver", "region": "north", "updated_at": iso(then)}
    tenants = [dump(cdc("r", "tenants", tenant, lsn=10, ts=then - timedelta(days=1)))]
    write_file(settings.landing_dir, "oltp.public.tenants", hour_start(then), 0, 0, tenants)
    cursor = _ingest(defs, instance, None)
    live = _tick(defs, instance, LIVE_SENSOR)
    [request] = live.run_requests or []
    assert {SLA_KEY, OFF_ROUTE_KEY} <= set(request.asset_selection or [])
    assert set(request.asset_check_keys or []) == set(LIVE_CHECKS)
    result = _run_request(defs, instance, request)
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == OFF_ROUTE_CHECK]
    assert not evaluation.passed and evaluation.metadata[DELIVERED_KEY].value is True
    [posted] = webhook.bodies
    episode = (
        f"courier {OFF_COURIER} order {OFF_ORDER} (north) off route from {started:%Y-%m-%d %H:%M:%S} UTC: 12.0 min"
    )
    assert OFF_ROUTE_CHECK in posted["text"] and episode in posted["text"] and "up to 3." in posted["text"]

    # More pings, a minute apart: the episode goes on 3 minutes, the courier comes back, then leaves again for 7 minutes
    # (a second episode).
    second = then + timedelta(minutes=4)
    lat, lon = CORRIDOR["pickup_lat"] + 0.016, CORRIDOR["pickup_lon"]
    east = [DETOUR_LON] * 3 + [0.0] + [DETOUR_LON] * 8
    pings = [
        dump(ping(f"more-{k}", then + k * timedelta(minutes=1), courier_id=OFF_COURIER, lat=lat, lon=lon + dx))
        for k, dx in enumerate(east)
    ]
    write_file(settings.landing_dir, "logistics.tracking_pings", hour_start(then), 1, 0, pings)
    _ingest(defs, instance, cursor)
    [request] = _tick(defs, instance, LIVE_SENSOR, live.cursor).run_requests or []
    result = _run_request(defs, instance, request)
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == OFF_ROUTE_CHECK]
    assert not evaluation.passed
    assert len(webhook.bodies) == 2 and f"from {second:%Y-%m-%d %H:%M:%S} UTC: 7.0 min" in webhook.bodies[1]["text"]
    assert f"from {started:%Y-%m-%d %H:%M:%S}" not in webhook.bodies[1]["text"]

    # The full transform of the same hours finds both episodes again, and alerts neither.
    [full] = _tick(defs, instance, "transform_after_ingest").run_requests or []
    result = _run_request(defs, instance, full)
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == OFF_ROUTE_CHECK]
    assert evaluation.passed and len(webhook.bodies) == 2
    assert [a["check_name"] for a in read_log(settings.alerts_log)] == [OFF_ROUTE_CHECK] * 2
    check_keys = list(defs.resolve_asset_graph().asset_check_keys)
    assert deliver_check_alerts(instance, check_keys, None, settings)[0] == 0
