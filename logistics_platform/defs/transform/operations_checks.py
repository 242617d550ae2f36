"""Checks of the operations marts, on the windows and dates the run built: SLA breaches and delivery-time anomalies.

Both are WARN (the data is right, the operation is not); the check-alert sensor still sends them
(``ALERTING_WARN_CHECKS``). The queries live in :mod:`logistics_platform.lib.transform.operations`.
"""

# No `from __future__ import annotations`: Dagster reads the check function annotations at runtime.

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from logistics_platform.lib.transform import operations
from logistics_platform.lib.transform.arrival_window import run_window
from logistics_platform.settings import Settings

SLA_KEY = dg.AssetKey(["marts", operations.SLA_MART])
DAILY_KEY = dg.AssetKey(["marts", operations.DAILY_MART])


def run_arrival_hours(tags: Mapping[str, str]) -> tuple[datetime | None, datetime | None]:
    """First and last arrival hour (inclusive) the run built: its window tags, else every hour of its day partitions;
    (None, None) when unpartitioned."""
    window = run_window(tags)
    return (None, None) if window is None else (window.first, window.last)


def _scope(first: datetime | None, last: datetime | None) -> str:
    return "every window" if first is None else f"arrival hours {first:%Y-%m-%d %H:00} .. {last:%Y-%m-%d %H:00}"


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
        metadata: dict[str, Any] = {
            "scope": _scope(first, last),
            "breached_windows": dg.MetadataValue.json(
                [
                    {"window_start": str(b.window_start), "region": b.region, "late_share": str(b.late_share)}
                    for b in breaches
                ]
            ),
        }
        return dg.AssetCheckResult(
            passed=not breaches,
            severity=dg.AssetCheckSeverity.WARN,
            description=operations.sla_summary(breaches, settings.sla_late_share_max),
            metadata=metadata,
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
        return dg.AssetCheckResult(
            passed=not anomalies,
            severity=dg.AssetCheckSeverity.WARN,
            description=operations.anomaly_summary(anomalies),
            metadata={
                "scope": _scope(first, last),
                "anomalous_regions": dg.MetadataValue.json(
                    [{"delivery_date": str(a.delivery_date), "region": a.region} for a in anomalies]
                ),
            },
        )

    return [sla_within_target, delivery_time_within_baseline]
