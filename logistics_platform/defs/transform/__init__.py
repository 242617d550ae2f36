"""Dagster definitions for the transform domain: the dbt project as assets, and the publish of marts to Iceberg.

Thin glue: dbt does the work (``dbt_project/``, run by dagster-dbt's ``DbtCliResource``, see :mod:`.assets`),
:mod:`logistics_platform.lib.transform.publish` writes the marts to the Iceberg namespace ``marts``
(:mod:`.publish`), :mod:`.checks` compares the two stores, and :mod:`.operations_checks` watches the SLA and
delivery-time marts.
"""

import dagster as dg

from logistics_platform.defs.transform.assets import FOLDED_WINDOWS_SPEC, build_dbt_assets
from logistics_platform.defs.transform.checks import build_publish_checks
from logistics_platform.defs.transform.operations_checks import build_operations_checks
from logistics_platform.defs.transform.publish import build_publish_assets
from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""
    return dg.Definitions(
        assets=[build_dbt_assets(settings), build_publish_assets(), FOLDED_WINDOWS_SPEC],
        asset_checks=[*build_publish_checks(), *build_operations_checks(settings)],
    )
