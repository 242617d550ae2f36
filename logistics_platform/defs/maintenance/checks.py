"""The table-health check of every Iceberg table: small files, snapshots, manifests, orphan bytes.

(No ``from __future__ import annotations`` here: Dagster resolves resource annotations at runtime.)
"""

from collections.abc import Iterator

import dagster as dg

from logistics_platform.defs.constants import CHECKED_TABLES, HEALTH_CHECK
from logistics_platform.defs.maintenance.assets import MAINTENANCE_KEY, fmt_bytes
from logistics_platform.resources import IcebergCatalog
from logistics_platform.settings import Settings


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

    from logistics_platform.lib.maintenance import MaintenanceOptions
    from logistics_platform.lib.maintenance.health import HealthThresholds, table_health

    options = MaintenanceOptions.from_settings(settings)
    limits = HealthThresholds()
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
        h = table_health(table, small_file_bytes=options.small_file_bytes, now=options.current_time())
        worst = h.worst_partition()
        problems = []
        if worst and worst.small_files > limits.max_small_files_per_partition:
            problems.append(
                f"partition {worst.partition} has {worst.small_files} small files "
                f"(> {limits.max_small_files_per_partition}): is nightly compaction running?"
            )
        if h.snapshots > limits.max_snapshots:
            problems.append(f"{h.snapshots} snapshots (> {limits.max_snapshots}): is snapshot expiry running?")
        if h.manifests_current > limits.max_manifests_per_snapshot:
            problems.append(
                f"{h.manifests_current} manifests in the current snapshot (> {limits.max_manifests_per_snapshot})"
            )
        if h.orphan_bytes > limits.max_orphan_bytes:
            problems.append(f"{fmt_bytes(h.orphan_bytes)} unreferenced files under the table location")
        partitions_md = "\n".join(
            ["| partition | files | small files | small ratio | bytes |", "|---|---|---|---|---|"]
            + [
                f"| {p.partition} | {p.files} | {p.small_files} | {p.small_file_ratio:.0%} | {fmt_bytes(p.bytes)} |"
                for p in h.partitions[-60:]
            ]
        )
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
                "partitions": dg.MetadataValue.md(partitions_md),
            },
        )
