"""Lakehouse maintenance on pyiceberg: :func:`maintain_table`; the steps' order and why: docs/internals/capmaint.md."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from logistics_platform.lib.connections import NAMESPACES
from logistics_platform.lib.maintenance import files
from logistics_platform.lib.maintenance.compaction import CompactionResult, compact_table
from logistics_platform.lib.maintenance.expiry import ExpiryResult, ensure_metadata_retention, expire_table
from logistics_platform.lib.maintenance.manifests import ManifestRewriteResult, rewrite_manifests
from logistics_platform.lib.maintenance.options import Hooks as Hooks
from logistics_platform.lib.maintenance.options import MaintenanceOptions
from logistics_platform.lib.maintenance.tags import TagResult, apply_daily_tags

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableState:
    """Storage footprint of a table: live data files of the current snapshot, and everything under its location."""

    data_files: int
    data_bytes: int
    snapshots: int
    manifests: int
    stored_files: int
    stored_bytes: int


def table_state(table: Table) -> TableState:
    tasks = list(table.scan().plan_files())  # the current snapshot's; none without one
    stored = files.list_files(files.pyarrow_io(table), table.location())
    return TableState(
        data_files=len(tasks),
        data_bytes=sum(t.file.file_size_in_bytes for t in tasks),
        snapshots=len(table.metadata.snapshots),
        manifests=files.manifest_count(table),
        stored_files=len(stored),
        stored_bytes=sum(f.size for f in stored),
    )


@dataclass
class TableReport:
    """Everything one maintenance run did (or, in dry-run, would do) to one table."""

    table: str
    dry_run: bool
    before: TableState | None = None
    after: TableState | None = None
    tags: TagResult | None = None
    compaction: CompactionResult | None = None
    manifests: ManifestRewriteResult | None = None
    expiry: ExpiryResult | None = None
    orphans: files.OrphanResult | None = None
    duration_s: float = 0.0
    error: str | None = None

    @property
    def bytes_reclaimed(self) -> int:
        expired = self.expiry.bytes_reclaimed if self.expiry else 0
        orphaned = self.orphans.orphan_bytes if self.orphans else 0
        return expired + orphaned

    def metadata(self) -> dict[str, float | int | str]:
        """Flat figures for Dagster metadata and the CLI table."""
        out: dict[str, float | int | str] = {"duration_s": round(self.duration_s, 3), "dry_run": str(self.dry_run)}
        for label, state in (("before", self.before), ("after", self.after)):
            if state:
                out.update({f"{figure}_{label}": value for figure, value in asdict(state).items()})
        if self.compaction:
            out["partitions_compacted"] = len(self.compaction.committed)
            out["files_rewritten"] = self.compaction.files_rewritten
            out["files_written"] = self.compaction.files_written
            checks = [f"{p.partition}={p.checksum_after}" for p in self.compaction.committed]
            if checks:
                out["compaction_checksums"] = "; ".join(checks)
        if self.expiry:
            out["snapshots_expired"] = len(self.expiry.snapshots_expired)
            out["expired_files_deleted"] = self.expiry.files_deleted + self.expiry.metadata_files_deleted
        if self.orphans:
            out["orphan_files_removed"] = self.orphans.deleted  # 0 in a dry run
            out["orphan_files_found"] = len(self.orphans.orphans)
            out["orphan_bytes"] = self.orphans.orphan_bytes
        if self.tags:
            out["tags_created"] = len(self.tags.created)
            out["tags_removed"] = len(self.tags.removed)
        out["bytes_reclaimed"] = self.bytes_reclaimed
        if self.error:
            out["error"] = self.error
        return out


def maintain_table(
    table: Table, options: MaintenanceOptions, progress: Callable[[str], None] | None = None
) -> TableReport:
    """Run every maintenance step on one table, in the order that keeps it readable throughout."""
    say = progress or (lambda msg: log.info("%s", msg))
    name, dry = ".".join(table.name()), options.dry_run
    now = options.current_time()
    started = time.monotonic()
    report = TableReport(table=name, dry_run=dry, before=table_state(table))
    if not dry:
        ensure_metadata_retention(table, options.metadata_previous_versions)
    say(f"{name}: daily tags")
    report.tags = apply_daily_tags(table, now=now, retention_days=options.daily_tag_retention_days, dry_run=dry)
    say(f"{name}: compaction")
    report.compaction = compact_table(
        table,
        small_file_bytes=options.small_file_bytes,
        target_file_bytes=options.target_file_bytes,
        dry_run=dry,
        before_commit=options.hooks.before_compaction_commit,
        progress=say,
    )
    say(f"{name}: manifests")
    report.manifests = rewrite_manifests(table, max_manifests=options.max_manifests_per_snapshot, dry_run=dry)
    say(f"{name}: snapshot expiry")
    report.expiry = expire_table(
        table,
        retention=options.snapshot_retention,
        min_keep=options.min_snapshots_to_keep,
        now=now,
        dry_run=dry,
        hooks=options.hooks,
    )
    say(f"{name}: orphan files")
    report.orphans = files.remove_orphans(table, safety_window=options.orphan_safety_window, now=now, dry_run=dry)
    table.refresh()
    report.after = table_state(table)
    report.duration_s = time.monotonic() - started
    return report


def list_iceberg_tables(catalog: Catalog, namespaces: tuple[str, ...] = NAMESPACES) -> list[str]:
    """``namespace.table`` of every table in the maintained namespaces (missing namespaces are skipped)."""
    existing = {ns[0] if isinstance(ns, tuple) else str(ns) for ns in catalog.list_namespaces()}
    return sorted(".".join(ident) for ns in namespaces if ns in existing for ident in catalog.list_tables(ns))


def maintain_catalog(
    catalog: Catalog,
    options: MaintenanceOptions,
    tables: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[TableReport]:
    """Maintain ``tables`` (default: every table in bronze and marts); a failing table does not stop the others."""
    reports = []
    for ident in tables if tables is not None else list_iceberg_tables(catalog):
        try:
            reports.append(maintain_table(catalog.load_table(ident), options, progress))
        except Exception as exc:
            log.exception("maintenance of %s failed", ident)
            reports.append(TableReport(table=ident, dry_run=options.dry_run, error=f"{type(exc).__name__}: {exc}"))
    return reports


def fmt_bytes(n: int) -> str:
    """``n`` bytes in B, KiB, MiB or GiB, for people."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:,.1f} {unit}" if unit != "B" else f"{int(size):,} B"
        size /= 1024
    return f"{n} B"


# The report's columns: the CLI prints them, the asset shows them as Markdown.
REPORT_COLUMNS = "table|data files|stored bytes|compacted|snapshots expired|files deleted|orphans (size)|reclaimed"
REPORT_COLUMNS += "|tags +/-|seconds|status"


def report_rows(reports: Sequence[TableReport]) -> list[list[str]]:
    """What maintenance did (or, in a dry run, would do) to each table: a header, then a row per table."""
    rows = [REPORT_COLUMNS.split("|")]
    for r in reports:
        b, a, comp, exp, orph = r.before, r.after, r.compaction, r.expiry, r.orphans
        compacted = (comp.partitions if r.dry_run else comp.committed) if comp else []
        rows.append(
            [
                r.table,
                f"{b.data_files} -> {a.data_files}" if b and a else "-",
                f"{fmt_bytes(b.stored_bytes)} -> {fmt_bytes(a.stored_bytes)}" if b and a else "-",
                f"{sum(p.files_before for p in compacted)} -> {sum(p.files_after for p in compacted)}" if comp else "-",
                str(len(exp.snapshots_expired)) if exp else "-",
                str(exp.files_deleted + exp.metadata_files_deleted) if exp else "-",
                f"{len(orph.orphans)} ({fmt_bytes(orph.orphan_bytes)})" if orph else "-",
                fmt_bytes(r.bytes_reclaimed),
                f"{len(r.tags.created)}/{len(r.tags.removed)}" if r.tags else "-",
                f"{r.duration_s:.1f}",
                r.error or "ok",
            ]
        )
    return rows


def markdown_table(rows: list[list[str]]) -> str:
    """``rows`` (the first one the header) as a Markdown table."""
    header, *body = rows
    return "\n".join(f"| {' | '.join(row)} |" for row in [header, ["---"] * len(header), *body])
