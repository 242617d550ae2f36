"""Dagster definitions for the maintenance domain: the nightly ``lakehouse_maintenance`` job and table health.

The logic lives in :mod:`logistics_platform.lib.maintenance`; this module only wires it into Dagster.
(No ``from __future__ import annotations`` here: Dagster resolves config and resource annotations at runtime.)
"""

from collections.abc import Iterator

import dagster as dg

from logistics_platform.defs.constants import (
    CHECKED_TABLES,
    HEALTH_CHECK,
    MAINTENANCE_GROUP,
    MAINTENANCE_JOB,
    MAINTENANCE_POOL,
    MAINTENANCE_WRITER_TAGS,
)
from logistics_platform.settings import Settings

GROUP = MAINTENANCE_GROUP
JOB_NAME = MAINTENANCE_JOB
WRITER_TAG = MAINTENANCE_WRITER_TAGS
MAINTENANCE_KEY = dg.AssetKey(["maintenance", "iceberg_tables"])


class MaintenanceConfig(dg.Config):
    """Run-time switches of the maintenance job (launchpad)."""

    dry_run: bool = False
    tables: list[str] = []  # namespace.table; empty = every table in bronze and marts


def _fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:,.1f} {unit}" if unit != "B" else f"{int(size):,} B"
        size /= 1024
    return f"{n} B"


def _report_markdown(reports: list) -> str:  # list[TableReport]
    lines = [
        "| table | data files before → after | stored bytes before → after | snapshots expired | "
        "bytes reclaimed | orphans removed | tags +/- | seconds | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        m = r.metadata()
        lines.append(
            f"| {r.table} | {m.get('data_files_before', '-')} → {m.get('data_files_after', '-')} | "
            f"{_fmt_bytes(int(m.get('stored_bytes_before', 0)))} → {_fmt_bytes(int(m.get('stored_bytes_after', 0)))} | "
            f"{m.get('snapshots_expired', 0)} | {_fmt_bytes(int(m.get('bytes_reclaimed', 0)))} | "
            f"{m.get('orphan_files_removed', 0)} | {m.get('tags_created', 0)}/{m.get('tags_removed', 0)} | "
            f"{m.get('duration_s', 0)} | {r.error or 'ok'} |"
        )
    return "\n".join(lines)


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""

    @dg.asset(
        key=MAINTENANCE_KEY,
        group_name=GROUP,
        kinds={"iceberg", "python"},
        op_tags=WRITER_TAG,
        # One maintenance writer at a time, whichever way the run was launched (run tags miss backfills).
        pool=MAINTENANCE_POOL,
    )
    def iceberg_tables(
        context: dg.AssetExecutionContext, config: MaintenanceConfig, settings: dg.ResourceParam[Settings]
    ) -> dg.MaterializeResult:
        """Nightly Iceberg maintenance: daily tags, compaction, manifest consolidation, snapshot expiry, orphans."""
        import time

        from logistics_platform.lib.connections import load_catalog
        from logistics_platform.lib.maintenance import MaintenanceOptions, maintain_catalog

        started = time.monotonic()
        options = MaintenanceOptions.from_settings(settings, dry_run=config.dry_run)
        catalog = load_catalog(settings)
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
            "report": dg.MetadataValue.md(_report_markdown(reports)),
            **{f"table/{k}": v for k, v in per_table.items()},
        }
        if failed:
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
        context: dg.AssetCheckExecutionContext, settings: dg.ResourceParam[Settings]
    ) -> Iterator[dg.AssetCheckResult]:
        """Measure each Iceberg table and warn when a health threshold is exceeded."""
        from pyiceberg.exceptions import NoSuchTableError

        from logistics_platform.lib.connections import load_catalog
        from logistics_platform.lib.maintenance import MaintenanceOptions
        from logistics_platform.lib.maintenance.health import HealthThresholds, table_health

        options = MaintenanceOptions.from_settings(settings)
        limits = HealthThresholds()
        catalog = load_catalog(settings)
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
                problems.append(f"{_fmt_bytes(h.orphan_bytes)} unreferenced files under the table location")
            partitions_md = "\n".join(
                ["| partition | files | small files | small ratio | bytes |", "|---|---|---|---|---|"]
                + [
                    f"| {p.partition} | {p.files} | {p.small_files} | {p.small_file_ratio:.0%} "
                    f"| {_fmt_bytes(p.bytes)} |"
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

    job = dg.define_asset_job(
        JOB_NAME,
        selection=dg.AssetSelection.assets(MAINTENANCE_KEY) | dg.AssetSelection.checks(iceberg_table_health),
        description="Compaction, manifest consolidation, daily tags, snapshot expiry and orphan removal "
        "on every Iceberg table, then table health checks.",
        tags=WRITER_TAG,
    )

    # Running by default: the job is safe by construction (age windows, validated commits), and a maintenance
    # schedule that someone must remember to switch on is the one that silently lets storage and scan times grow.
    schedule = dg.ScheduleDefinition(
        name="nightly_maintenance_schedule",
        job=job,
        cron_schedule="0 2 * * *",
        execution_timezone="UTC",
        default_status=(
            dg.DefaultScheduleStatus.RUNNING if settings.automation_running else dg.DefaultScheduleStatus.STOPPED
        ),
        tags=WRITER_TAG,
        description="Nightly Iceberg maintenance at 02:00 UTC (after the day's last hourly ingest has landed).",
    )

    return dg.Definitions(
        assets=[iceberg_tables],
        asset_checks=[iceberg_table_health],
        jobs=[job],
        schedules=[schedule],
    )
