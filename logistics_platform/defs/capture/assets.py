"""The capture asset: one drain of the OLTP database's changes into the landing zone."""

import dagster as dg

from logistics_platform.defs.constants import CAPTURE_GROUP
from logistics_platform.settings import Settings

CAPTURE_KEY = dg.AssetKey(["capture", "oltp_changes"])


class CaptureConfig(dg.Config):
    """Run-time switches of a capture run (launchpad)."""

    mode: str = "logical"  # logical | query
    resnapshot: bool = False


@dg.asset(key=CAPTURE_KEY, group_name=CAPTURE_GROUP, kinds={"postgres", "python"})
def oltp_changes(
    context: dg.AssetExecutionContext, config: CaptureConfig, settings: dg.ResourceParam[Settings]
) -> dg.MaterializeResult:
    """Changes of the OLTP database landed as Debezium events (logical replication, or polling in query mode)."""
    from logistics_platform.lib.capture import lag as lag_mod
    from logistics_platform.lib.capture.runner import run_capture

    if not settings.oltp_dsn:
        context.log.info("capture is not configured: set OLTP_DSN to capture from PostgreSQL")
        return dg.MaterializeResult(metadata={"status": "not configured"})
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
        lag = lag_mod.measure(settings.oltp_dsn, settings.landing_dir, settings.capture_slot)
        metadata.update(lag.metadata())
    return dg.MaterializeResult(metadata=metadata)  # type: ignore[arg-type]
