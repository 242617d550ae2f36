"""The nightly maintenance job: the maintenance asset, then the health check of every table."""

import dagster as dg

from logistics_platform.defs.constants import MAINTENANCE_JOB, MAINTENANCE_WRITER_TAGS
from logistics_platform.defs.maintenance.assets import MAINTENANCE_KEY


def build_maintenance_job(health_checks: dg.AssetChecksDefinition) -> dg.Definitions:
    """The maintenance job; its schedule targets it by name.

    Returned in a ``Definitions``: the type ``define_asset_job`` returns is not exported by ``dagster``.
    """
    job = dg.define_asset_job(
        MAINTENANCE_JOB,
        selection=dg.AssetSelection.assets(MAINTENANCE_KEY) | dg.AssetSelection.checks(health_checks),
        description="Compaction, manifest consolidation, daily tags, snapshot expiry and orphan removal "
        "on every Iceberg table, then table health checks.",
        tags=MAINTENANCE_WRITER_TAGS,
    )
    return dg.Definitions(jobs=[job])
