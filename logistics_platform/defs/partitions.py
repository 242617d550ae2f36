"""The arrival-hour partitioning shared by bronze and the dbt layer."""

from __future__ import annotations

import dagster as dg

from logistics_platform.settings import Settings


def arrival_hour_partitions(settings: Settings) -> dg.HourlyPartitionsDefinition:
    """One partition per UTC arrival hour, from ``PARTITIONS_START`` on."""
    return dg.HourlyPartitionsDefinition(start_date=settings.partitions_start, timezone="UTC")
