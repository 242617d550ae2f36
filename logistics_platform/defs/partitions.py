"""Bronze by arrival hour, the dbt layer by arrival day (UTC); ``end_offset=1``: the open hour and day included."""

from __future__ import annotations

import dagster as dg

from logistics_platform.settings import Settings


def arrival_hour_partitions(settings: Settings) -> dg.HourlyPartitionsDefinition:
    """One partition per UTC arrival hour, from ``PARTITIONS_START`` through the hour in progress."""
    return dg.HourlyPartitionsDefinition(start_date=settings.partitions_start, timezone="UTC", end_offset=1)


def arrival_day_partitions(settings: Settings) -> dg.DailyPartitionsDefinition:
    """One partition per UTC arrival day, from the day of ``PARTITIONS_START`` through today."""
    start = settings.partitions_start_datetime
    return dg.DailyPartitionsDefinition(start_date=f"{start:%Y-%m-%d}", timezone="UTC", end_offset=1)
