"""One capture run from the settings: the entry point shared by the CLI and the Dagster asset."""

from __future__ import annotations

from logistics_platform.lib.capture.replication import CaptureResult, Clock, Hook, capture_logical, utc_now
from logistics_platform.lib.capture.slot import CaptureError
from logistics_platform.settings import Settings

MODES = ("logical", "query")


def run_capture(
    settings: Settings,
    mode: str = "logical",
    resnapshot: bool = False,
    hook: Hook | None = None,
    clock: Clock = utc_now,
) -> CaptureResult:
    """Drain the OLTP changes available now into ``settings.landing_dir``."""
    if not settings.oltp_dsn:
        raise CaptureError("capture: OLTP_DSN is not set; set it to the libpq DSN of the OLTP database")
    if mode == "query":
        from logistics_platform.lib.capture.query_mode import capture_query

        return capture_query(
            settings.oltp_dsn,
            settings.landing_dir,
            settings.capture_slot,
            settings.capture_query_overlap_seconds,
            clock,
        )
    if mode != "logical":
        raise CaptureError(f"capture: mode {mode!r} is not one of {', '.join(MODES)}")
    return capture_logical(
        settings.oltp_dsn,
        settings.landing_dir,
        settings.capture_slot,
        settings.capture_publication,
        resnapshot=resnapshot,
        hook=hook,
        clock=clock,
    )
