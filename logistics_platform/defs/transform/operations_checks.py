"""WARN checks of the operations marts on the windows and dates the run built: SLA breaches, delivery-time anomalies."""

# No `from __future__ import annotations`: Dagster reads the check function annotations at runtime.

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from logistics_platform.lib.operate import alerts
from logistics_platform.lib.transform import operations
from logistics_platform.lib.transform.arrival_window import run_window
from logistics_platform.settings import Settings

SLA_KEY = dg.AssetKey(["marts", operations.SLA_MART])
DAILY_KEY = dg.AssetKey(["marts", operations.DAILY_MART])


def run_arrival_hours(tags: Mapping[str, str]) -> tuple[datetime | None, datetime | None]:
    """First and last arrival hour the run built ((None, None) when unpartitioned)."""
    window = run_window(tags)
    return (None, None) if window is None else (window.first, window.last)


def _scope(first: datetime | None, last: datetime | None) -> str:
    return "every window" if first is None else f"arrival hours {first:%Y-%m-%d %H:00} .. {last:%Y-%m-%d %H:00}"


def _deliver_breach(context: dg.AssetCheckExecutionContext, settings: Settings, description: str, scope: str) -> bool:
    """Post the SLA breach alert of this run (log and webhook); whether it reached both."""
    run, asset = context.run, SLA_KEY.to_user_string()
    alert = alerts.Alert(
        kind=alerts.KIND_CHECK_FAILURE,
        summary=f"{asset} {operations.SLA_CHECK}",
        error=description,
        run_id=run.run_id,
        job_name=run.job_name,
        assets=(asset,),
        partition=scope,
        check_name=operations.SLA_CHECK,
    )
    result = alerts.deliver(alert, settings.alerts_log, settings.alert_webhook_url)
    context.log.info(f"SLA alert: logged={result.logged} posted={result.posted}")
    return alerts.delivered(result, settings.alert_webhook_url)


def build_operations_checks(settings: Settings) -> list[dg.AssetChecksDefinition]:
    @dg.asset_check(
        asset=SLA_KEY,
        name=operations.SLA_CHECK,
        description=(
            "No SLA window built by the run is breached (at least SLA_MIN_DELIVERIES deliveries and a late share "
            "above SLA_LATE_SHARE_MAX); a failure names region, window and late share."
        ),
    )
    def sla_within_target(context: dg.AssetCheckExecutionContext, duckdb: DuckDBResource) -> dg.AssetCheckResult:
        first, last = run_arrival_hours(context.run.tags)
        with duckdb.get_connection() as con:
            breaches = operations.breached_windows(con, settings.sla_window_minutes, first, last)
        listed = [
            {"window_start": str(b.window_start), "region": b.region, "late_share": str(b.late_share)} for b in breaches
        ]
        metadata: dict[str, Any] = {"scope": _scope(first, last), "breached_windows": dg.MetadataValue.json(listed)}
        description = operations.sla_summary(breaches, settings.sla_late_share_max)
        if breaches:
            metadata[alerts.DELIVERED_KEY] = _deliver_breach(context, settings, description or "", _scope(first, last))
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
        first, last = run_arrival_hours(context.run.tags)
        with duckdb.get_connection() as con:
            anomalies = operations.anomalous_days(con, first, last)
        listed = [{"delivery_date": str(a.delivery_date), "region": a.region} for a in anomalies]
        return dg.AssetCheckResult(
            passed=not anomalies,
            severity=dg.AssetCheckSeverity.WARN,
            description=operations.anomaly_summary(anomalies),
            metadata={"scope": _scope(first, last), "anomalous_regions": dg.MetadataValue.json(listed)},
        )

    return [sla_within_target, delivery_time_within_baseline]
