"""WARN checks of the operations marts on what the run built: SLA breaches, delivery-time anomalies, new off-route
episodes."""

# No `from __future__ import annotations`: Dagster reads the check function annotations at runtime.

from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from logistics_platform.defs.constants import OFF_ROUTE_KEY, SLA_KEY
from logistics_platform.lib.operate import alerts
from logistics_platform.lib.transform import operations
from logistics_platform.lib.transform.arrival_window import ArrivalWindow, run_window
from logistics_platform.settings import Settings

DAILY_KEY = dg.AssetKey(["marts", operations.DAILY_MART])


def _scope(window: ArrivalWindow | None) -> str:
    if window is None:
        return "every window"
    return f"arrival hours {window.first:%Y-%m-%d %H:00} .. {window.last:%Y-%m-%d %H:00}"


def _deliver(context: dg.AssetCheckExecutionContext, settings: Settings, text: str) -> bool:
    """Post this run's alert of the failed check (log and webhook); whether it reached both."""
    run, scope, key = context.run, _scope(run_window(context.run.tags)), context.check_specs[0].key
    asset, kind = key.asset_key.to_user_string(), alerts.KIND_CHECK_FAILURE
    alert = alerts.check_alert(asset, key.name, text, run.run_id, run.job_name, scope, kind)
    result = alerts.deliver(alert, settings.alerts_log, settings.alert_webhook_url)
    context.log.info(f"{key.name} alert: logged={result.logged} posted={result.posted}")
    return alerts.delivered(result, settings.alert_webhook_url)


def build_operations_checks(settings: Settings) -> list[dg.AssetChecksDefinition]:
    @dg.asset_check(
        asset=SLA_KEY,
        name=operations.SLA_CHECK,
        description=(
            "No SLA window built by the run is breached (at least SLA_MIN_DELIVERIES deliveries and a late share "
            "above SLA_LATE_SHARE_MAX); a failure names region, window and late share, and the run posts each breached "
            f"window once ({operations.ALERTED_BREACHES})."
        ),
    )
    def sla_within_target(context: dg.AssetCheckExecutionContext, duckdb: DuckDBResource) -> dg.AssetCheckResult:
        window = run_window(context.run.tags)
        with duckdb.get_connection() as con:
            breaches = operations.breached_windows(con, settings.sla_window_minutes, window)
            fresh = operations.new_breaches(con, breaches, context.run.run_id)
        listed = [
            {"window_start": str(b.window_start), "region": b.region, "late_share": str(b.late_share)} for b in breaches
        ]
        metadata: dict[str, Any] = {"scope": _scope(window), "breached_windows": dg.MetadataValue.json(listed)}
        description = operations.sla_summary(fresh, settings.sla_late_share_max, len(breaches) - len(fresh))
        if breaches:  # posted by the run when new; breaches posted before are not posted again (True: nothing to send)
            metadata[alerts.DELIVERED_KEY] = not fresh or _deliver(context, settings, description or "")
        return dg.AssetCheckResult(
            passed=not breaches, severity=dg.AssetCheckSeverity.WARN, description=description, metadata=metadata
        )

    @dg.asset_check(
        asset=DAILY_KEY,
        name=operations.ANOMALY_CHECK,
        description=(
            "No delivery date built by the run has a region whose average delivery time is more than 3 standard "
            "deviations off its trailing 7-day baseline; a failure names the regions and dates."
        ),
    )
    def delivery_time_within_baseline(
        context: dg.AssetCheckExecutionContext, duckdb: DuckDBResource
    ) -> dg.AssetCheckResult:
        window = run_window(context.run.tags)
        with duckdb.get_connection() as con:
            anomalies = operations.anomalous_days(con, window)
        listed = [{"delivery_date": str(a.delivery_date), "region": a.region} for a in anomalies]
        return dg.AssetCheckResult(
            passed=not anomalies,
            severity=dg.AssetCheckSeverity.WARN,
            description=operations.anomaly_summary(anomalies),
            metadata={"scope": _scope(window), "anomalous_regions": dg.MetadataValue.json(listed)},
        )

    @dg.asset_check(
        asset=OFF_ROUTE_KEY,
        name=operations.OFF_ROUTE_CHECK,
        description=(
            "No new off-route episode in the (courier, order) pairs the run rebuilt: an episode overlapping none "
            f"alerted before ({operations.ALERTED_EPISODES}) fails it once, naming courier, order, start, minutes "
            "and maximum distance, and the run posts the alert."
        ),
    )
    def couriers_on_route(context: dg.AssetCheckExecutionContext, duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as con:
            episodes = operations.new_off_route_episodes(con, context.run.run_id)
        metadata: dict[str, Any] = {"new_episodes": dg.MetadataValue.json([e.describe() for e in episodes])}
        if description := operations.off_route_summary(episodes):
            metadata[alerts.DELIVERED_KEY] = _deliver(context, settings, description)
        return dg.AssetCheckResult(
            passed=not episodes, severity=dg.AssetCheckSeverity.WARN, description=description, metadata=metadata
        )

    return [sla_within_target, delivery_time_within_baseline, couriers_on_route]
