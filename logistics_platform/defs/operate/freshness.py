"""Freshness of bronze and the marts: last-update checks and the sensor that evaluates them."""

import warnings
from datetime import timedelta

import dagster as dg

from logistics_platform.defs.constants import BRONZE_DATA_TABLES, MARTS
from logistics_platform.defs.operate.common import sensor_status
from logistics_platform.settings import Settings


def build_freshness_checks(settings: Settings) -> list[dg.AssetChecksDefinition]:
    """A last-update check per bronze data table and per mart, with the windows from the settings."""
    # Checks rather than FreshnessPolicy: a check evaluation is a visible pass/fail in the UI that the
    # alert sensor turns into an alert, and the sensor decides when it is evaluated.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        bronze = dg.build_last_update_freshness_checks(
            assets=[dg.AssetKey(["bronze", t]) for t in BRONZE_DATA_TABLES],
            lower_bound_delta=timedelta(hours=settings.bronze_freshness_hours),
        )
        marts = dg.build_last_update_freshness_checks(
            assets=[dg.AssetKey(["marts", m]) for m in MARTS],
            lower_bound_delta=timedelta(hours=settings.marts_freshness_hours),
        )
    return [*bronze, *marts]


def build_freshness(settings: Settings, checks: list[dg.AssetChecksDefinition]) -> dg.Definitions:
    """The freshness checks and the sensor that requests their evaluation."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        sensor = dg.build_sensor_for_freshness_checks(
            freshness_checks=checks,
            minimum_interval_seconds=600,
            name="freshness_checks_sensor",
            default_status=sensor_status(settings),
        )
    return dg.Definitions(asset_checks=checks, sensors=[sensor])
