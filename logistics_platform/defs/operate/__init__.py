"""Operating the platform: the jobs, sensors and schedules that keep it running, freshness, backlog, alerts.

One module per concern (``jobs``, ``landing``, ``transform_sensor``, ``live``, ``freshness``, ``alert_sensors``,
``backlog``); thin Dagster glue over :mod:`logistics_platform.lib.operate`.
"""

import dagster as dg

from logistics_platform.defs.operate.alert_sensors import build_alert_sensors
from logistics_platform.defs.operate.backlog import build_backlog
from logistics_platform.defs.operate.freshness import build_freshness, build_freshness_checks
from logistics_platform.defs.operate.jobs import build_jobs
from logistics_platform.defs.operate.landing import build_landing_triggers
from logistics_platform.defs.operate.live import build_live_sensor
from logistics_platform.defs.operate.transform_sensor import build_transform_sensor
from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""
    freshness_checks = build_freshness_checks(settings)
    return dg.Definitions.merge(
        # One process per run, not one per step: a run here is one heavy step (ingest or dbt) plus light checks,
        # and each extra step process re-imports Dagster and the definitions.
        dg.Definitions(executor=dg.in_process_executor),
        build_jobs(settings, freshness_checks),
        build_landing_triggers(settings),
        dg.Definitions(sensors=[build_transform_sensor(settings)]),
        dg.Definitions(sensors=[build_live_sensor(settings)]),
        build_freshness(settings, freshness_checks),
        build_alert_sensors(settings),
        build_backlog(settings),
    )
