"""The capture asset (one drain of the OLTP database's changes into the landing zone) and its lag and WAL checks."""

import dagster as dg

from logistics_platform.defs.constants import CAPTURE_GROUP
from logistics_platform.settings import Settings

CAPTURE_KEY = dg.AssetKey(["capture", "oltp_changes"])
NOT_CONFIGURED = {"status": "not configured"}


class CaptureConfig(dg.Config):
    """Run-time switches of a capture run (launchpad)."""

    mode: str = "logical"  # logical | query
    resnapshot: bool = False


@dg.asset(key=CAPTURE_KEY, group_name=CAPTURE_GROUP, kinds={"postgres", "python"})
def oltp_changes(
    context: dg.AssetExecutionContext, config: CaptureConfig, settings: dg.ResourceParam[Settings]
) -> dg.MaterializeResult:
    """Changes of the OLTP database landed as Debezium events (logical replication, or polling in query mode)."""
    from logistics_platform.lib.capture import slot
    from logistics_platform.lib.capture.runner import run_capture

    if not settings.oltp_dsn:
        context.log.info("capture is not configured: set OLTP_DSN to capture from PostgreSQL")
        return dg.MaterializeResult(metadata=NOT_CONFIGURED)
    result = run_capture(settings, mode=config.mode, resnapshot=config.resnapshot)
    context.log.info(result.render())
    metadata: dict[str, object] = {
        "status": "captured",
        "mode": result.mode,
        "transactions": result.transactions,
        "changes": result.changes,
        "snapshot_rows": result.snapshot_rows,
        "skipped_transactions": result.skipped_transactions,
        "files": len(result.files),
    }
    if result.mode == "logical":
        metadata.update(slot.measure(settings.oltp_dsn, settings.landing_dir, settings.capture_slot).metadata())
    return dg.MaterializeResult(metadata=metadata)  # type: ignore[arg-type]


@dg.asset_check(asset=CAPTURE_KEY, name="capture_slot_lag")
def capture_slot_lag(settings: dg.ResourceParam[Settings]) -> dg.AssetCheckResult:
    """Warns when the replication slot is too many WAL bytes or seconds behind the OLTP server."""
    from logistics_platform.lib.capture import slot

    if not settings.oltp_dsn:
        return dg.AssetCheckResult(passed=True, metadata=NOT_CONFIGURED)
    lag = slot.measure(settings.oltp_dsn, settings.landing_dir, settings.capture_slot)
    problems = slot.lag_problems(lag, settings.capture_lag_warn_bytes, settings.capture_lag_warn_seconds)
    return dg.AssetCheckResult(
        passed=not problems,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(problems) or "within limits",
        metadata=lag.metadata(),  # type: ignore[arg-type]
    )


@dg.asset_check(asset=CAPTURE_KEY, name="capture_wal_retention")
def capture_wal_retention(settings: dg.ResourceParam[Settings]) -> dg.AssetCheckResult:
    """Fails, and alerts, when the slot is inactive and makes the OLTP server keep WAL beyond the limit."""
    from logistics_platform.lib.capture import slot
    from logistics_platform.lib.operate import alerts

    if not settings.oltp_dsn:
        return dg.AssetCheckResult(passed=True, metadata=NOT_CONFIGURED)
    lag = slot.measure(settings.oltp_dsn, settings.landing_dir, settings.capture_slot)
    if text := slot.retention_alert(lag, settings.capture_wal_retention_alert_bytes):
        alert = alerts.Alert(
            kind=alerts.KIND_CHECK_FAILURE,
            summary=f"capture slot {lag.slot} retains WAL",
            error=text,
            assets=(CAPTURE_KEY.to_user_string(),),
            check_name="capture_wal_retention",
        )
        alerts.deliver(alert, settings.alerts_log, settings.alert_webhook_url)
    return dg.AssetCheckResult(
        passed=text is None,
        severity=dg.AssetCheckSeverity.ERROR,
        description=text or "WAL retention within limits",
        metadata=lag.metadata(),  # type: ignore[arg-type]
    )
