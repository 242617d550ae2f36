"""Dagster definitions for change capture: the ``capture/oltp_changes`` asset and its lag and WAL checks.

Its own group (``capture``), outside the hourly ingest jobs: capture feeds the landing zone, which the existing
sensors and jobs pick up unchanged. Logic lives in :mod:`logistics_platform.lib.capture`.
"""

import dagster as dg

from logistics_platform.defs.capture.assets import CAPTURE_KEY, capture_slot_lag, capture_wal_retention, oltp_changes
from logistics_platform.settings import Settings

__all__ = ["CAPTURE_KEY", "build_defs"]


def build_defs(settings: Settings) -> dg.Definitions:
    """The capture asset and its checks (they report "not configured" while OLTP_DSN is unset)."""
    del settings  # everything reads the ``settings`` resource at run time
    return dg.Definitions(assets=[oltp_changes], asset_checks=[capture_slot_lag, capture_wal_retention])
