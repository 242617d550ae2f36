"""The arrival-time partitionings: bronze by arrival hour, the dbt layer by arrival day (UTC, the open one included).

``end_offset=1``: the hour (and the day) in progress is a partition, so files a live sink writes into the open hour
are ingested as they land, and today's marts are built from them.
"""

from __future__ import annotations

import dagster as dg

from logistics_platform.settings import Settings


def arrival_hour_partitions(settings: Settings) -> dg.HourlyPartitionsDefinition:
    """One partition per UTC arrival hour, from ``PARTITIONS_START`` through the hour in progress."""
    return dg.HourlyPartitionsDefinition(start_date=settings.partitions_start, timezone="UTC", end_offset=1)


def arrival_day_partitions(settings: Settings) -> dg.DailyPartitionsDefinition:
    """One partition per UTC arrival day, from the day of ``PARTITIONS_START`` through today."""
    return dg.DailyPartitionsDefinition(
        start_date=settings.partitions_start_datetime.strftime("%Y-%m-%d"), timezone="UTC", end_offset=1
    )
