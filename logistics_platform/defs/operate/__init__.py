"""Operating the platform: jobs, sensors, schedules, freshness, backlog, alerts (glue over ``lib.operate``)."""

import dagster as dg

from logistics_platform.defs.operate.alert_sensors import build_alert_sensors
from logistics_platform.defs.operate.backlog import build_backlog
from logistics_platform.defs.operate.jobs import build_freshness, build_jobs
from logistics_platform.defs.operate.landing import build_landing_triggers
from logistics_platform.defs.operate.transform_sensor import build_dbt_triggers
from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""
    freshness = build_freshness(settings)
    return dg.Definitions.merge(
        dg.Definitions(executor=dg.in_process_executor),  # a run is one heavy step: no process per step
        build_jobs(settings, freshness.asset_checks),
        build_landing_triggers(settings),
        build_dbt_triggers(settings),
        freshness,
        build_alert_sensors(settings),
        build_backlog(settings),
    )
