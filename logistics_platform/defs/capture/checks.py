"""Checks of the capture asset: slot lag (warning) and WAL kept by an inactive slot (error + alert)."""

import dagster as dg

from logistics_platform.defs.capture.assets import CAPTURE_KEY
from logistics_platform.settings import Settings


@dg.asset_check(asset=CAPTURE_KEY, name="capture_slot_lag")
def capture_slot_lag(settings: dg.ResourceParam[Settings]) -> dg.AssetCheckResult:
    """Warns when the replication slot is too many WAL bytes or seconds behind the OLTP server."""
    from logistics_platform.lib.capture import lag as lag_mod

    if not settings.oltp_dsn:
        return dg.AssetCheckResult(passed=True, metadata={"status": "not configured"})
    lag = lag_mod.measure(settings.oltp_dsn, settings.landing_dir, settings.capture_slot)
    problems = lag_mod.lag_problems(lag, settings.capture_lag_warn_bytes, settings.capture_lag_warn_seconds)
    return dg.AssetCheckResult(
        passed=not problems,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(problems) or "within limits",
        metadata=lag.metadata(),  # type: ignore[arg-type]
    )


@dg.asset_check(asset=CAPTURE_KEY, name="capture_wal_retention")
def capture_wal_retention(settings: dg.ResourceParam[Settings]) -> dg.AssetCheckResult:
    """Fails, and alerts, when the slot is inactive and makes the OLTP server keep WAL beyond the limit."""
    from logistics_platform.lib.capture import lag as lag_mod
    from logistics_platform.lib.operate import alerts

    if not settings.oltp_dsn:
        return dg.AssetCheckResult(passed=True, metadata={"status": "not configured"})
    lag = lag_mod.measure(settings.oltp_dsn, settings.landing_dir, settings.capture_slot)
    text = lag_mod.retention_alert(lag, settings.capture_wal_retention_alert_bytes)
    if text:
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
