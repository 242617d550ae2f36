"""The nightly maintenance asset: every Iceberg table compacted, tagged, expired and cleaned of orphans.

(No ``from __future__ import annotations`` here: Dagster resolves config and resource annotations at runtime.)
"""

import dagster as dg

from logistics_platform.defs.constants import MAINTENANCE_GROUP, MAINTENANCE_POOL, MAINTENANCE_WRITER_TAGS
from logistics_platform.defs.maintenance.report import report_markdown
from logistics_platform.defs.preflight import require_usable_lakehouse
from logistics_platform.resources import IcebergCatalog
from logistics_platform.settings import Settings

MAINTENANCE_KEY = dg.AssetKey(["maintenance", "iceberg_tables"])


class MaintenanceConfig(dg.Config):
    """Run-time switches of the maintenance job (launchpad)."""

    dry_run: bool = False
    tables: list[str] = []  # namespace.table; empty = every table in bronze and marts


def build_maintenance_asset() -> dg.AssetsDefinition:
    """The maintenance asset (its settings come from the ``settings`` resource)."""

    @dg.asset(
        key=MAINTENANCE_KEY,
        group_name=MAINTENANCE_GROUP,
        kinds={"iceberg", "python"},
        op_tags=MAINTENANCE_WRITER_TAGS,
        # One maintenance writer at a time, whichever way the run was launched (run tags miss backfills).
        pool=MAINTENANCE_POOL,
    )
    def iceberg_tables(
        context: dg.AssetExecutionContext,
        config: MaintenanceConfig,
        iceberg: IcebergCatalog,
        settings: dg.ResourceParam[Settings],
    ) -> dg.MaterializeResult:
        """Nightly Iceberg maintenance: daily tags, compaction, manifest consolidation, snapshot expiry, orphans."""
        import time

        from logistics_platform.lib.maintenance import MaintenanceOptions, maintain_catalog

        require_usable_lakehouse(settings)
        started = time.monotonic()
        options = MaintenanceOptions.from_settings(settings, dry_run=config.dry_run)
        catalog = iceberg.get_catalog()
        reports = maintain_catalog(catalog, options, tables=config.tables or None, progress=context.log.info)
        totals: dict[str, int] = {}
        per_table: dict[str, dg.MetadataValue] = {}
        for r in reports:
            for key, value in r.metadata().items():
                if isinstance(value, int) and not isinstance(value, bool):
                    totals[key] = totals.get(key, 0) + value
            per_table[r.table] = dg.MetadataValue.json(r.metadata())
        failed = [r for r in reports if r.error]
        metadata: dict[str, object] = {
            "tables": len(reports),
            "dry_run": config.dry_run,
            "files_before": totals.get("data_files_before", 0),
            "files_after": totals.get("data_files_after", 0),
            "bytes_before": totals.get("stored_bytes_before", 0),
            "bytes_after": totals.get("stored_bytes_after", 0),
            "snapshots_expired": totals.get("snapshots_expired", 0),
            "bytes_reclaimed": totals.get("bytes_reclaimed", 0),
            "orphan_files_removed": totals.get("orphan_files_removed", 0),
            "files_rewritten": totals.get("files_rewritten", 0),
            "tags_created": totals.get("tags_created", 0),
            "duration_s": round(time.monotonic() - started, 3),
            "report": dg.MetadataValue.md(report_markdown(reports)),
            **{f"table/{k}": v for k, v in per_table.items()},
        }
        if failed:
            # Other tables were maintained; fail the run so the failure is seen and alerted.
            raise dg.Failure(
                description="maintenance failed for " + ", ".join(f"{r.table} ({r.error})" for r in failed),
                metadata=metadata,  # type: ignore[arg-type]
            )
        return dg.MaterializeResult(metadata=metadata)  # type: ignore[arg-type]

    return iceberg_tables
