"""The nightly maintenance asset (every Iceberg table compacted, tagged, expired, cleaned) and its UI report.

(No ``from __future__ import annotations`` here: Dagster resolves config and resource annotations at runtime.)
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

from logistics_platform.defs.constants import MAINTENANCE_GROUP, MAINTENANCE_POOL, MAINTENANCE_WRITER_TAGS
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
    totals: dict[str, int] = {}
    for r in reports:
        for key, value in r.metadata().items():
            if isinstance(value, int) and not isinstance(value, bool):
                totals[key] = totals.get(key, 0) + value
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
