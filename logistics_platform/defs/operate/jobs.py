"""The hot path's jobs (ingest arrival hours, build dbt over a window of them); the freshness checks they leave out."""

import warnings
from collections.abc import Iterable
from datetime import timedelta

import dagster as dg

from logistics_platform.defs import constants as c
from logistics_platform.defs.operate.common import sensor_status
from logistics_platform.defs.partitions import arrival_day_partitions, arrival_hour_partitions
from logistics_platform.settings import Settings


def build_jobs(settings: Settings, freshness_checks: Iterable[dg.AssetsDefinition] | None = None) -> dg.Definitions:
    """The ingest and transform jobs (sensors and schedules target them by name), in a ``Definitions``."""
    # The hot path stays lean: freshness checks run from their sensor, table health with the nightly maintenance.
    elsewhere = dg.AssetSelection.checks(
        *[key for checks_def in freshness_checks or () for key in checks_def.check_keys],
        *[dg.AssetCheckKey(key, c.HEALTH_CHECK) for key in c.CHECKED_TABLES.values()],
    )
    ingest = dg.define_asset_job(
        c.INGEST_JOB,
        selection=dg.AssetSelection.groups(c.BRONZE_GROUP) - elsewhere,
        partitions_def=arrival_hour_partitions(settings),
        description="Ingest arrival hours from the landing zone into the bronze Iceberg tables.",
        tags={"logistics/layer": "bronze"},
    )
    transform = dg.define_asset_job(
        c.TRANSFORM_JOB,
        selection=dg.AssetSelection.groups(*c.TRANSFORM_GROUPS) - elsewhere,
        partitions_def=arrival_day_partitions(settings),
        description="Build the dbt staging, intermediate and marts models (and publish the marts) for a window of "
        "arrival hours in one run: the hours named by its tags logistics/arrival_hours_start/_end, else every hour "
        "of its arrival-day partitions.",
        tags={"logistics/writer": "duckdb", "logistics/layer": "dbt"},
    )
    return dg.Definitions(jobs=[ingest, transform])


def build_freshness(settings: Settings) -> dg.Definitions:
    """A last-update check per bronze data table and per mart (windows from the settings) and the sensor of them."""
    # Checks rather than FreshnessPolicy: a visible pass/fail that the alert sensor turns into an alert.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        bronze = dg.build_last_update_freshness_checks(
            assets=[dg.AssetKey(["bronze", t]) for t in c.BRONZE_DATA_TABLES],
            lower_bound_delta=timedelta(hours=settings.bronze_freshness_hours),
        )
        marts = dg.build_last_update_freshness_checks(
            assets=[dg.AssetKey(["marts", m]) for m in c.MARTS],
            lower_bound_delta=timedelta(hours=settings.marts_freshness_hours),
        )
        sensor = dg.build_sensor_for_freshness_checks(
            freshness_checks=[*bronze, *marts],
            minimum_interval_seconds=600,
            name="freshness_checks_sensor",
            default_status=sensor_status(settings),
        )
    return dg.Definitions(asset_checks=[*bronze, *marts], sensors=[sensor])
