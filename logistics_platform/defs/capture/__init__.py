"""Dagster definitions for change capture (group ``capture``, outside the hourly jobs: it feeds the landing zone)."""

import dagster as dg

from logistics_platform.defs.capture.assets import capture_slot_lag, capture_wal_retention, oltp_changes
from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """The capture asset and its checks (they report "not configured" while OLTP_DSN is unset)."""
    del settings  # everything reads the ``settings`` resource at run time
    return dg.Definitions(assets=[oltp_changes], asset_checks=[capture_slot_lag, capture_wal_retention])
