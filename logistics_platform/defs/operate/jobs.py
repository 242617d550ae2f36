"""The two jobs of the hot path: ingest arrival hours into bronze, build the dbt layer over a window of them."""

from collections.abc import Sequence

import dagster as dg

from logistics_platform.defs.constants import (
    BRONZE_GROUP,
    CHECKED_TABLES,
    HEALTH_CHECK,
    INGEST_JOB,
    TRANSFORM_GROUPS,
    TRANSFORM_JOB,
)
from logistics_platform.defs.partitions import arrival_day_partitions, arrival_hour_partitions
from logistics_platform.settings import Settings


def build_jobs(settings: Settings, freshness_checks: Sequence[dg.AssetChecksDefinition] = ()) -> dg.Definitions:
    """The ingest and transform jobs; sensors and schedules target them by name.

    Returned in a ``Definitions``: the type ``define_asset_job`` returns is not exported by ``dagster``.
    """
    # Keep the hot path lean: freshness checks run from their own sensor and table health from the nightly
    # maintenance job; the checks that belong to an asset (accounting, dbt tests) still run with it.
    elsewhere = dg.AssetSelection.checks(
        *[key for checks_def in freshness_checks for key in checks_def.check_keys],
        *[dg.AssetCheckKey(key, HEALTH_CHECK) for key in CHECKED_TABLES.values()],
    )
    ingest = dg.define_asset_job(
        INGEST_JOB,
        selection=dg.AssetSelection.groups(BRONZE_GROUP) - elsewhere,
        partitions_def=arrival_hour_partitions(settings),
        description="Ingest arrival hours from the landing zone into the bronze Iceberg tables.",
        tags={"logistics/layer": "bronze"},
    )
    transform = dg.define_asset_job(
        TRANSFORM_JOB,
        selection=dg.AssetSelection.groups(*TRANSFORM_GROUPS) - elsewhere,
        partitions_def=arrival_day_partitions(settings),
        description="Build the dbt staging, intermediate and marts models (and publish the marts) for a window of "
        "arrival hours in one run: the hours named by its tags logistics/arrival_hours_start/_end, else every hour "
        "of its arrival-day partitions.",
        tags={"logistics/writer": "duckdb", "logistics/layer": "dbt"},
    )
    return dg.Definitions(jobs=[ingest, transform])
