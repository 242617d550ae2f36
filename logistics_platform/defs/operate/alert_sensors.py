"""Alerts (``lib.operate.alerts``) on every failed run, and on failed blocking, ERROR, freshness and paging checks."""

import json
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

import dagster as dg

from logistics_platform.defs.operate.common import run_partition, sensor_status
from logistics_platform.lib.operate import alerts
from logistics_platform.lib.transform.operations import ALERTING_WARN_CHECKS
from logistics_platform.settings import Settings

# Failed evaluations of one check that a tick alerts on at most (the newest ones).
CHECK_HISTORY_LIMIT = 50


def run_failure_alert(context: dg.RunFailureSensorContext) -> alerts.Alert:
    """The alert for a failed run: its failed steps' root errors and the assets it left unmaterialized."""
    run = context.dagster_run
    step_errors = []
    for event in context.get_step_failure_events():
        error: Any = getattr(event.event_specific_data, "error", None)
        while getattr(error, "cause", None) is not None:  # Dagster wraps user errors in "Error occurred while ..."
            error = error.cause
        step_errors.append(f"{event.step_key}: {error.message.strip() if error is not None else (event.message or '')}")
    planned, done = dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, dg.DagsterEventType.ASSET_MATERIALIZATION
    seen: dict[dg.DagsterEventType, set[str]] = {planned: set(), done: set()}  # event type -> asset keys
    for entry in context.instance.all_logs(run.run_id, of_type=set(seen)):
        if (logged := entry.dagster_event) is not None and logged.asset_key is not None:
            seen[logged.event_type].add(logged.asset_key.to_user_string())
    left = seen[planned] - seen[done]
    assets = tuple(sorted(left)) or tuple(sorted(k.to_user_string() for k in (run.asset_selection or ())))
    retry = run.tags.get("dagster/retry_number")
    return alerts.Alert(
        kind=alerts.KIND_RUN_FAILURE,
        summary=f"{run.job_name} failed" + (f" (retry {retry})" if retry else ""),
        error="\n".join(step_errors) or (context.failure_event.message or "run failed"),
        run_id=run.run_id,
        job_name=run.job_name,
        assets=assets,
        partition=run_partition(run),
    )


def build_alert_sensors(settings: Settings) -> dg.Definitions:
    """The run-failure and check-failure alert sensors."""

    @dg.run_failure_sensor(
        name="alert_on_run_failure",
        default_status=sensor_status(settings),
        minimum_interval_seconds=30,
        description="Posts every failed run (run, asset, partition, error) to ALERT_WEBHOOK_URL and ALERTS_LOG.",
    )
    def alert_on_run_failure(context: dg.RunFailureSensorContext) -> None:
        result = alerts.deliver(run_failure_alert(context), settings.alerts_log, settings.alert_webhook_url)
        context.log.info(f"alert for run {context.dagster_run.run_id}: logged={result.logged} posted={result.posted}")

    @dg.sensor(
        name="alert_on_check_failure",
        default_status=sensor_status(settings),
        minimum_interval_seconds=30,
        description=(
            "Posts failed blocking or ERROR checks, failed freshness checks and failed SLA, delivery-time anomaly and "
            "off-route checks to ALERT_WEBHOOK_URL and ALERTS_LOG. Cursor: the last check evaluation event seen."
        ),
    )
    def alert_on_check_failure(context: dg.SensorEvaluationContext) -> dg.SkipReason | None:
        check_keys = list(context.repository_def.asset_graph.asset_check_keys)  # type: ignore[union-attr]
        sent, cursor = deliver_check_alerts(context.instance, check_keys, context.cursor, settings)
        context.update_cursor(cursor)
        return None if sent else dg.SkipReason("no failed check to alert on")

    return dg.Definitions(sensors=[alert_on_run_failure, alert_on_check_failure])


def deliver_check_alerts(
    instance: dg.DagsterInstance, check_keys: Sequence[dg.AssetCheckKey], cursor: str | None, settings: Settings
) -> tuple[int, str]:
    """Alert on each failed alerting check evaluation newer than ``cursor`` (check key -> newest execution record id
    seen); returns (alerts sent, new cursor). Reads the check-execution index (see docs/internals/operate.md)."""
    seen: dict[str, int] = json.loads(cursor) if cursor else {}
    sent = 0
    for key, newest in instance.event_log_storage.get_latest_asset_check_execution_by_key(list(check_keys)).items():
        name = key.to_user_string()
        last = seen.get(name)
        seen[name] = max(newest.id, last or 0)
        if last is not None and newest.id <= last:
            continue
        failed = islice(_failed_evaluations(instance, key, last), CHECK_HISTORY_LIMIT)  # the newest ones
        for record, evaluation in sorted(failed, key=lambda pair: pair[0].id):
            sent += _alert_for_check(instance, record, evaluation, settings)
    return sent, json.dumps(seen, sort_keys=True, separators=(",", ":"))


def _failed_evaluations(
    instance: dg.DagsterInstance, key: dg.AssetCheckKey, after: int | None
) -> Iterator[tuple[Any, dg.AssetCheckEvaluation]]:
    """The failed evaluations of ``key`` with a record id above ``after``, newest first, paged through the history
    (its status filter takes a type ``dagster`` does not export)."""
    page_cursor: int | None = None
    while True:
        page = instance.event_log_storage.get_asset_check_execution_history(
            key, limit=CHECK_HISTORY_LIMIT, cursor=page_cursor
        )
        for record in page:
            if after is not None and record.id <= after:
                return
            dagster_event = record.event.dagster_event if record.event else None
            evaluation = dagster_event.event_specific_data if dagster_event else None
            if isinstance(evaluation, dg.AssetCheckEvaluation) and not evaluation.passed:
                yield record, evaluation
        if len(page) < CHECK_HISTORY_LIMIT:
            return
        page_cursor = page[-1].id


def _alert_for_check(
    instance: dg.DagsterInstance, record: Any, evaluation: dg.AssetCheckEvaluation, settings: Settings
) -> bool:
    """Deliver the alert of a failed evaluation that alerts and that its own run has not delivered (SLA, off route)."""
    is_freshness = "freshness" in evaluation.check_name
    pages = evaluation.check_name in ALERTING_WARN_CHECKS
    if not (evaluation.blocking or evaluation.severity == dg.AssetCheckSeverity.ERROR or is_freshness or pages):
        return False
    if (done := evaluation.metadata.get(alerts.DELIVERED_KEY)) is not None and done.value is True:
        return False
    run = instance.get_run_by_id(record.run_id) if record.run_id else None
    check = evaluation.check_name
    error = evaluation.description or f"check {check} failed ({evaluation.severity.value})"
    partition = evaluation.partition or (run_partition(run) if run else None)
    kind = alerts.KIND_FRESHNESS if is_freshness else alerts.KIND_CHECK_FAILURE
    job = run.job_name if run else None
    alert = alerts.check_alert(evaluation.asset_key.to_user_string(), check, error, record.run_id, job, partition, kind)
    alerts.deliver(alert, settings.alerts_log, settings.alert_webhook_url)
    return True
