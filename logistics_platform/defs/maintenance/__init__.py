"""Dagster definitions for the maintenance domain: the nightly ``lakehouse_maintenance`` job and table health.

``assets`` (the maintenance asset), ``checks`` (table health), ``jobs``, ``schedules``, and ``report`` (how results
read in the UI); the logic lives in :mod:`logistics_platform.lib.maintenance`.
"""

import dagster as dg

from logistics_platform.defs.maintenance.assets import build_maintenance_asset
from logistics_platform.defs.maintenance.checks import build_health_checks
from logistics_platform.defs.maintenance.jobs import build_maintenance_job
from logistics_platform.defs.maintenance.schedules import build_nightly_schedule
from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""
    health_checks = build_health_checks()
    return dg.Definitions.merge(
        dg.Definitions(
            assets=[build_maintenance_asset()],
            asset_checks=[health_checks],
            schedules=[build_nightly_schedule(settings)],
        ),
        build_maintenance_job(health_checks),
    )
