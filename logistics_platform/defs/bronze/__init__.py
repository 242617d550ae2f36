"""Dagster definitions for the ingest domain: landing (external) -> bronze Iceberg tables, per arrival hour."""

import dagster as dg

from logistics_platform.defs.bronze.assets import build_bronze_assets, landing_specs
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """Landing external assets and the partitioned bronze multi-asset with its checks."""
    return dg.Definitions(assets=[*landing_specs(arrival_hour_partitions(settings)), build_bronze_assets(settings)])
