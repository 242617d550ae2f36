"""The nightly maintenance asset (every Iceberg table compacted, tagged, expired, cleaned) and the table-health check.

(No ``from __future__ import annotations`` here: Dagster resolves config and resource annotations at runtime.)
"""

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from logistics_platform.lib.maintenance import TableReport

MAINTENANCE_KEY = dg.AssetKey(["maintenance", "iceberg_tables"])


def fmt_bytes(n: int) -> str:
    """``n`` bytes in B, KiB, MiB or GiB, for people."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:,.1f} {unit}" if unit != "B" else f"{int(size):,} B"
        size /= 1024
    return f"{n} B"


def report_markdown(reports: Sequence["TableReport"]) -> str:
    """A Markdown table of what maintenance did to each table."""
    lines = [
        "| table | data files before → after | stored bytes before → after | snapshots expired | "
        "bytes reclaimed | orphans removed | tags +/- | seconds | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        m = r.metadata()
        lines.append(
            f"| {r.table} | {m.get('data_files_before', '-')} → {m.get('data_files_after', '-')} | "
            f"{fmt_bytes(int(m.get('stored_bytes_before', 0)))} → {fmt_bytes(int(m.get('stored_bytes_after', 0)))} | "
            f"{m.get('snapshots_expired', 0)} | {fmt_bytes(int(m.get('bytes_reclaimed', 0)))} | "
            f"{m.get('orphan_files_removed', 0)} | {m.get('tags_created', 0)}/{m.get('tags_removed', 0)} | "
            f"{m.get('duration_s', 0)} | {r.error or 'ok'} |"
        )
    return "\n".join(lines)


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

    from logistics_platform.lib.maintenance import MaintenanceOptions, maintain_catalog

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
