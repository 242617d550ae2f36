"""Dagster definitions for the transform domain: the dbt project as assets, the publish of marts to Iceberg, checks."""

import dagster as dg

from logistics_platform.defs.transform.assets import FOLDED_WINDOWS_SPEC, build_dbt_assets
from logistics_platform.defs.transform.operations_checks import build_operations_checks
from logistics_platform.defs.transform.publish import build_publish_assets, build_publish_checks
from logistics_platform.lib.transform.spark import is_spark
from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""
    if is_spark(settings):  # dbt on Spark writes the Iceberg marts itself, behind its own audit gate
        return dg.Definitions(assets=[build_dbt_assets(settings), FOLDED_WINDOWS_SPEC])
    return dg.Definitions(
        assets=[build_dbt_assets(settings), build_publish_assets(), FOLDED_WINDOWS_SPEC],
        asset_checks=[*build_publish_checks(), *build_operations_checks(settings)],
    )
