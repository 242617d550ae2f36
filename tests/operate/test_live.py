"""The live SLA path: a file landed in the hour in progress (real clock) -> the landing sensor's ingest -> the live
sensor's SLA-only transform run -> its sla_within_target check posts the alert; the full transform still follows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.definitions import build_definitions
from logistics_platform.defs.constants import INGEST_JOB, TRANSFORM_JOB
from logistics_platform.defs.operate.alert_sensors import deliver_check_alerts
from logistics_platform.defs.operate.transform_sensor import LIVE_SENSOR, SLA_KEY
from logistics_platform.lib.operate.alerts import DELIVERED_KEY, read_log
from logistics_platform.lib.operate.transform_pending import LIVE_HOURS, WATERMARK_TAG, live_batch, live_cursor
from logistics_platform.lib.timekeys import hour_key, hour_start
from logistics_platform.lib.transform.operations import SLA_CHECK
from logistics_platform.pipeline import QUIET
from logistics_platform.settings import local_settings
from tests.support.bronze import write_file
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
def test_a_breach_landed_in_the_open_hour_is_alerted_by_the_sla_only_run(
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
    assert list(request.asset_check_keys or []) == [dg.AssetCheckKey(SLA_KEY, SLA_CHECK)]
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
