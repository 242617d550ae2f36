"""The operate layer wired to the whole platform: retries, freshness checks into alerts, backlog asset."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from logistics_platform.definitions import build_definitions
from logistics_platform.defs.constants import BRONZE_DATA_TABLES, MARTS
from logistics_platform.defs.operate.backlog import BACKLOG_KEY
from logistics_platform.lib.operate.alerts import read_log
from logistics_platform.settings import local_settings
from tests.support.http import Webhook

LAYERS = ("bronze", "staging", "intermediate", "marts")


def test_ingest_and_dbt_assets_retry_with_backoff(tmp_path: Path) -> None:
    graph = build_definitions(local_settings(tmp_path)).resolve_asset_graph()
    checked = 0
    for key in graph.materializable_asset_keys:
        node = graph.get(key)
        if node.group_name not in LAYERS:
            continue
        policy = node.assets_def.op.retry_policy
        assert policy is not None, f"{key.to_user_string()} has no retry policy"
        assert policy.max_retries >= 1 and policy.delay and policy.backoff is not None, (key, policy)
        checked += 1
    assert checked >= len(BRONZE_DATA_TABLES) + len(MARTS)


def _run_freshness(defs: dg.Definitions, instance: dg.DagsterInstance) -> list[dg.AssetCheckEvaluation]:
    """Evaluate the freshness sensor and execute the checks it requests, as the daemon would."""
    repo = defs.get_repository_def()
    sensor = repo.get_sensor_def("freshness_checks_sensor")
    data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, repository_def=repo))
    [request] = data.run_requests
    job = dg.define_asset_job("freshness_now", selection=dg.AssetSelection.checks(*request.asset_check_keys))
    result = (
        dg.Definitions.merge(defs, dg.Definitions(jobs=[job]))
        .resolve_job_def("freshness_now")
        .execute_in_process(instance=instance)
    )
    return result.get_asset_check_evaluations()


@contextmanager
def _updated_instance() -> Iterator[dg.DagsterInstance]:
    """An instance in which every bronze table and mart was just updated."""
    with dg.instance_for_test() as instance:
        for table in BRONZE_DATA_TABLES:
            instance.report_runless_asset_event(
                dg.AssetMaterialization(["bronze", table], partition="2026-11-01-00:00")
            )
        for mart in MARTS:
            instance.report_runless_asset_event(dg.AssetMaterialization(["marts", mart], partition="2026-11-01"))
        yield instance


def test_freshness_checks_pass_when_recently_updated(tmp_path: Path) -> None:
    with _updated_instance() as instance:
        evaluations = _run_freshness(build_definitions(local_settings(tmp_path)), instance)
        assert len(evaluations) == len(BRONZE_DATA_TABLES) + len(MARTS)
        assert all(e.passed for e in evaluations)
        repo = build_definitions(local_settings(tmp_path)).get_repository_def()
        sensor = repo.get_sensor_def("alert_on_check_failure")
        assert sensor.evaluate_tick(dg.build_sensor_context(instance=instance, repository_def=repo)).skip_message
    assert read_log(tmp_path / "alerts.jsonl") == []


def test_freshness_checks_fail_into_an_alert(tmp_path: Path, webhook: Webhook) -> None:
    url = webhook.url
    # A zero-hour window for bronze: bronze is stale now, the marts (26 h) are still fresh.
    strict = build_definitions(local_settings(tmp_path, alert_webhook_url=url, bronze_freshness_hours=0.0))
    with _updated_instance() as instance:
        evaluations = _run_freshness(strict, instance)
        failed = sorted(e.asset_key.path[1] for e in evaluations if not e.passed)
        assert failed == sorted(BRONZE_DATA_TABLES)

        sensor = strict.get_repository_def().get_sensor_def("alert_on_check_failure")
        repo = strict.get_repository_def()
        data = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, repository_def=repo))
        alerts = read_log(tmp_path / "alerts.jsonl")
        assert sorted(a["assets"][0] for a in alerts) == sorted(f"bronze/{t}" for t in BRONZE_DATA_TABLES)
        assert {a["kind"] for a in alerts} == {"freshness"}
        assert len(webhook.bodies) == len(BRONZE_DATA_TABLES)
        assert "bronze/orders" in " ".join(b["text"] for b in webhook.bodies)
        # The cursor moved past them: the next tick alerts on nothing old.
        again = sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, cursor=data.cursor, repository_def=repo)
        )
        assert again.skip_message and len(read_log(tmp_path / "alerts.jsonl")) == len(BRONZE_DATA_TABLES)


def test_backlog_asset_reports_pending_hours_as_a_warning(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    for hour in range(5):
        folder = settings.landing_dir / f"topics/oltp.public.orders/dt=2026-11-01/hr={hour:02d}"
        folder.mkdir(parents=True)
        (folder / f"oltp.public.orders+0+{hour * 10:010d}.json").write_text("null\nnull\n")
    defs = build_definitions(settings)
    with dg.instance_for_test() as instance:
        result = defs.resolve_job_def("report_backlog").execute_in_process(instance=instance)
        mat = result.asset_materializations_for_node(BACKLOG_KEY.to_python_identifier())[0]
        assert mat.metadata["hours_pending"].value == 5
        assert mat.metadata["lines_pending"].value == 10
        [check] = result.get_asset_check_evaluations()
        assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
