"""The nightly maintenance asset (every Iceberg table compacted, tagged, expired, cleaned) and the health check."""

# No ``from __future__ import annotations`` here: Dagster resolves config and resource annotations at runtime.

from collections import Counter
from collections.abc import Iterator

import dagster as dg

from logistics_platform.defs.constants import (
    CHECKED_TABLES,
    HEALTH_CHECK,
    MAINTENANCE_GROUP,
    MAINTENANCE_POOL,
    MAINTENANCE_WRITER_TAGS,
)
from logistics_platform.defs.preflight import require_usable_lakehouse
from logistics_platform.resources import IcebergCatalog
from logistics_platform.settings import Settings

MAINTENANCE_KEY = dg.AssetKey(["maintenance", "iceberg_tables"])
PARTITION_COLUMNS = ["partition", "files", "small files", "small ratio", "bytes"]
# Figures of the tables' reports that the asset's metadata sums under their own names.
SUMMED = ("snapshots_expired", "bytes_reclaimed", "orphan_files_removed", "files_rewritten", "tags_created")


class MaintenanceConfig(dg.Config):
    """Run-time switches of the maintenance job (launchpad)."""

    dry_run: bool = False
    tables: list[str] = []  # namespace.table; empty = every table in bronze and marts


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

    from logistics_platform.lib.maintenance import MaintenanceOptions, maintain_catalog, markdown_table, report_rows

    require_usable_lakehouse(settings)
    started = time.monotonic()
    options = MaintenanceOptions.from_settings(settings, dry_run=config.dry_run)
    reports = maintain_catalog(iceberg.get_catalog(), options, tables=config.tables or None, progress=context.log.info)
    totals: Counter[str] = Counter()
    for r in reports:
        totals.update({key: value for key, value in r.metadata().items() if type(value) is int})  # not bools
    metadata: dict[str, object] = {
        "tables": len(reports),
        "dry_run": config.dry_run,
        "files_before": totals["data_files_before"],
        "files_after": totals["data_files_after"],
        "bytes_before": totals["stored_bytes_before"],
        "bytes_after": totals["stored_bytes_after"],
        **{key: totals[key] for key in SUMMED},
        "duration_s": round(time.monotonic() - started, 3),
        "report": dg.MetadataValue.md(markdown_table(report_rows(reports))),
        **{f"table/{r.table}": dg.MetadataValue.json(r.metadata()) for r in reports},
    }
    if failed := [r for r in reports if r.error]:
        # Other tables were maintained; fail the run so the failure is seen and alerted.
        raise dg.Failure(
            description="maintenance failed for " + ", ".join(f"{r.table} ({r.error})" for r in failed),
            metadata=metadata,  # type: ignore[arg-type]
        )
    return dg.MaterializeResult(metadata=metadata)  # type: ignore[arg-type]


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec(
            HEALTH_CHECK,
            asset=key,
            description="Iceberg table health: small files per partition, snapshots, manifests, orphan bytes.",
            blocking=False,
            # Measured after the maintenance asset when both run in the nightly job.
            additional_deps=[MAINTENANCE_KEY],
        )
        for key in CHECKED_TABLES.values()
    ],
    can_subset=True,
)
def iceberg_table_health(
    context: dg.AssetCheckExecutionContext, iceberg: IcebergCatalog, settings: dg.ResourceParam[Settings]
) -> Iterator[dg.AssetCheckResult]:
    """Measure each Iceberg table and warn when a health threshold is exceeded."""
    from pyiceberg.exceptions import NoSuchTableError

    from logistics_platform.lib.maintenance import MaintenanceOptions, fmt_bytes, health, markdown_table

    options = MaintenanceOptions.from_settings(settings)
    catalog = iceberg.get_catalog()
    identifiers = {key: ident for ident, key in CHECKED_TABLES.items()}
    for check_key in sorted(context.selected_asset_check_keys, key=lambda k: k.asset_key.to_user_string()):
        identifier = identifiers[check_key.asset_key]
        try:
            table = catalog.load_table(identifier)
        except NoSuchTableError:
            yield dg.AssetCheckResult(
                asset_key=check_key.asset_key,
                check_name=HEALTH_CHECK,
                passed=True,
                severity=dg.AssetCheckSeverity.WARN,
                description=f"{identifier} is not in the Iceberg catalog yet; nothing to measure",
            )
            continue
        h = health.table_health(table, small_file_bytes=options.small_file_bytes, now=options.current_time())
        worst = h.worst_partition()
        problems = []
        if worst and worst.small_files > health.MAX_SMALL_FILES_PER_PARTITION:
            problems.append(
                f"partition {worst.partition} has {worst.small_files} small files "
                f"(> {health.MAX_SMALL_FILES_PER_PARTITION}): is nightly compaction running?"
            )
        if h.snapshots > health.MAX_SNAPSHOTS:
            problems.append(f"{h.snapshots} snapshots (> {health.MAX_SNAPSHOTS}): is snapshot expiry running?")
        if h.manifests_current > health.MAX_MANIFESTS_PER_SNAPSHOT:
            problems.append(
                f"{h.manifests_current} manifests in the current snapshot (> {health.MAX_MANIFESTS_PER_SNAPSHOT})"
            )
        if h.orphan_bytes > health.MAX_ORPHAN_BYTES:
            problems.append(f"{fmt_bytes(h.orphan_bytes)} unreferenced files under the table location")
        partitions = [
            [p.partition, str(p.files), str(p.small_files), f"{p.small_file_ratio:.0%}", fmt_bytes(p.bytes)]
            for p in h.partitions[-60:]
        ]
        yield dg.AssetCheckResult(
            asset_key=check_key.asset_key,
            check_name=HEALTH_CHECK,
            passed=not problems,
            severity=dg.AssetCheckSeverity.WARN,
            description="; ".join(problems) or "healthy",
            metadata={
                "data_files": h.data_files,
                "data_bytes": h.data_bytes,
                "small_files": h.small_files,
                "small_file_ratio": round(h.small_file_ratio, 4),
                "worst_partition": worst.partition if worst else "",
                "worst_partition_small_files": worst.small_files if worst else 0,
                "snapshots": h.snapshots,
                "manifests_current_snapshot": h.manifests_current,
                "manifests_max_per_snapshot": h.manifests_max,
                "orphan_files": h.orphan_files,
                "orphan_bytes": h.orphan_bytes,
                "partitions": dg.MetadataValue.md(markdown_table([PARTITION_COLUMNS, *partitions])),
            },
        )
