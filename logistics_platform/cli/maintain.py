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
ARGS = {
    "--dry-run": {"action": "store_true", "help": "only report what would be done; change and delete nothing"},
    "--table": {
        "action": "append",
        "metavar": "T",
        "help": "namespace.table (or a bronze table name) to maintain; repeatable; default every table",
    },
}


def run(args: argparse.Namespace) -> int:
    from logistics_platform.cli.errors import USAGE, CommandError, print_table
    from logistics_platform.lib.connections import catalog_of, preflight
    from logistics_platform.lib.maintenance import (
        MaintenanceOptions,
        fmt_bytes,
        list_iceberg_tables,
        maintain_catalog,
        report_rows,
    )
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

    print(f"Iceberg maintenance ({'DRY RUN: nothing changed' if args.dry_run else 'applied'})")
    print_table(report_rows(reports))
    if args.dry_run:
        for r in reports:
            for f in r.orphans.orphans if r.orphans else []:
                print(f"would delete orphan {f.path} ({fmt_bytes(f.size)}, modified {f.mtime:%Y-%m-%d %H:%M} UTC)")
            for path, size in r.expiry.planned_deletes if r.expiry else []:
                print(f"would delete expired {path} ({fmt_bytes(size)})")
            for p in r.compaction.partitions if r.compaction else []:
                print(f"would compact {r.table} {p.partition}: {p.files_before} files ({fmt_bytes(p.bytes_before)})")
    failed = [r for r in reports if r.error]
    if failed:
        print(f"maintain: {len(failed)} table(s) failed; see the status column and the log above", file=sys.stderr)
        return 1
    return 0
