"""`maintain` sub-command: run (or preview) the nightly Iceberg maintenance now."""

from __future__ import annotations

import argparse
import sys

HELP = "compact, expire snapshots, remove orphans, tag days on the Iceberg tables"
DESCRIPTION = (
    "Iceberg maintenance on every table in bronze and marts (or --table): daily tags, compaction, manifest "
    "consolidation, snapshot expiry with file deletion, orphan-file removal. Thresholds come from the settings "
    "(COMPACTION_*, SNAPSHOT_*, ORPHAN_SAFETY_DAYS, ...)."
)
# The report's columns.
COLUMNS = "table|data files|compacted|snapshots expired|files deleted|orphans (size)|reclaimed|tags +/-|seconds|status"
ARGS = {
    "--dry-run": {"action": "store_true", "help": "only report what would be done; change and delete nothing"},
    "--table": {
        "action": "append",
        "metavar": "T",
        "help": "namespace.table (or a bronze table name) to maintain; repeatable; default every table",
    },
}


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def run(args: argparse.Namespace) -> int:
    from logistics_platform.cli.errors import USAGE, CommandError, print_table
    from logistics_platform.lib.connections import catalog_of, preflight
    from logistics_platform.lib.maintenance import MaintenanceOptions, list_iceberg_tables, maintain_catalog
    from logistics_platform.settings import load_settings

    settings = load_settings()
    preflight(settings)  # a missing bucket or refused key: one line, not a failure per table
    catalog = catalog_of(settings)
    known = list_iceberg_tables(catalog)
    tables = None
    if args.table:
        tables = [t if "." in t else f"bronze.{t}" for t in args.table]
        unknown = [t for t in tables if t not in known]
        if unknown:
            raise CommandError(
                f"no such Iceberg table: {', '.join(unknown)}; tables: {', '.join(known) or 'none yet'}", USAGE
            )
    options = MaintenanceOptions.from_settings(settings, dry_run=args.dry_run)
    reports = maintain_catalog(catalog, options, tables=tables, progress=lambda m: print(f"  .. {m}", file=sys.stderr))

    verb = "would" if args.dry_run else "did"
    print(f"Iceberg maintenance ({'DRY RUN: nothing changed' if args.dry_run else 'applied'})")
    rows = [COLUMNS.split("|")]
    for r in reports:
        b, a = r.before, r.after
        comp = r.compaction
        if args.dry_run and comp:
            planned_in = sum(p.files_before for p in comp.partitions)
            compacted = f"{planned_in} -> {sum(p.files_after for p in comp.partitions)}"
        else:
            compacted = f"{comp.files_rewritten} -> {comp.files_written}" if comp else "-"
        exp = r.expiry
        orph = r.orphans
        rows.append(
            [
                r.table,
                f"{b.data_files} -> {a.data_files}" if b and a else "-",
                compacted,
                str(len(exp.snapshots_expired)) if exp else "-",
                str(exp.files_deleted + exp.metadata_files_deleted) if exp else "-",
                f"{len(orph.orphans)} ({_size(orph.orphan_bytes)})" if orph else "-",
                _size(r.bytes_reclaimed),
                f"{len(r.tags.created)}/{len(r.tags.removed)}" if r.tags else "-",
                f"{r.duration_s:.1f}",
                r.error or "ok",
            ]
        )
    print_table(rows)
    if args.dry_run:
        for r in reports:
            for f in r.orphans.orphans if r.orphans else []:
                print(f"{verb} delete orphan {f.path} ({_size(f.size)}, modified {f.mtime:%Y-%m-%d %H:%M} UTC)")
            for path, size in r.expiry.planned_deletes if r.expiry else []:
                print(f"{verb} delete expired {path} ({_size(size)})")
            for p in r.compaction.partitions if r.compaction else []:
                print(f"{verb} compact {r.table} {p.partition}: {p.files_before} files ({_size(p.bytes_before)})")
    failed = [r for r in reports if r.error]
    if failed:
        print(f"maintain: {len(failed)} table(s) failed; see the status column and the log above", file=sys.stderr)
        return 1
    return 0
