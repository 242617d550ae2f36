"""One capture run from the settings: the entry point shared by the CLI and the Dagster asset."""

from __future__ import annotations

import re

from logistics_platform.lib.capture.query_mode import capture_query
from logistics_platform.lib.capture.replication import CaptureResult, Hook, capture_logical
from logistics_platform.lib.capture.slot import CaptureError
from logistics_platform.settings import Settings

MODES = ("logical", "query")
# What PostgreSQL accepts as a slot name (and what is safe to quote into the publication's DDL).
_NAME = re.compile(r"[a-z0-9_]{1,63}")


def run_capture(
    settings: Settings, mode: str = "logical", resnapshot: bool = False, hook: Hook | None = None
) -> CaptureResult:
    """Drain the OLTP changes available now into ``settings.landing_dir``."""
    if not settings.oltp_dsn:
        raise CaptureError("capture: OLTP_DSN is not set; set it to the libpq DSN of the OLTP database")
    for variable, value in (
        ("CAPTURE_SLOT", settings.capture_slot),
        ("CAPTURE_PUBLICATION", settings.capture_publication),
    ):
        if not _NAME.fullmatch(value):
            raise CaptureError(f"capture: {variable}={value!r}: use 1-63 lower-case letters, digits and underscores")
    if mode == "query":
        return capture_query(
            settings.oltp_dsn, settings.landing_dir, settings.capture_slot, settings.capture_query_overlap_seconds
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
    )
