"""`time-travel` sub-command: query an Iceberg table as of a timestamp, a tag or a snapshot id."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "time-travel",
        help="query a table as of a timestamp, tag (daily-YYYY-MM-DD) or snapshot id",
        description="Answer a DuckDB query from one snapshot of an Iceberg table. The table is visible as a "
        "relation named after it (e.g. `orders` and `bronze.orders`).",
    )
    p.add_argument("table", help="namespace.table, or a bronze table name such as orders")
    p.add_argument(
        "--as-of",
        required=True,
        help="ISO timestamp (UTC if no zone, e.g. 2026-11-02T10:00), a tag/branch (daily-2026-11-02) or a snapshot id",
    )
    p.add_argument("--sql", help="query to run (default: select count(*) from <table>)")
    p.add_argument("--limit", type=int, default=50, help="rows to print at most (default 50)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import duckdb
    from pyiceberg.exceptions import NoSuchTableError

    from logistics_platform.lib.connections import catalog_of, connect
    from logistics_platform.lib.maintenance.time_travel import (
        TimeTravelError,
        iceberg_scan_sql,
        query_as_of,
        query_error,
    )
    from logistics_platform.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"time-travel: {exc}", file=sys.stderr)
        return 2
    identifier = args.table if "." in args.table else f"bronze.{args.table}"
    try:
        table = catalog_of(settings).load_table(identifier)
    except NoSuchTableError:
        print(f"time-travel: no Iceberg table {identifier}; run `logistics-platform run` first", file=sys.stderr)
        return 2
    name = identifier.split(".")[-1]
    con = connect(settings=settings)
    try:
        resolved, rel = query_as_of(con, table, args.as_of, args.sql or f'select count(*) as "rows" from "{name}"')
    except TimeTravelError as exc:
        print(f"time-travel: {exc}", file=sys.stderr)
        return 2
    print(
        f"{identifier} as of {args.as_of}: snapshot {resolved.snapshot_id} "
        f"(committed {resolved.committed_at:%Y-%m-%d %H:%M:%S} UTC, from {resolved.resolved_from})"
    )
    print(f"-- same in DuckDB: select ... from {iceberg_scan_sql(table, resolved.snapshot_id)}")
    columns = rel.columns
    try:
        rows = rel.fetchmany(args.limit + 1)
    except duckdb.Error as exc:  # errors that show only when the query runs (a failed cast, ...)
        print(f"time-travel: {query_error(exc, table.name()[-2], table.name()[-1])}", file=sys.stderr)
        return 2
    shown = [[("NULL" if v is None else str(v)) for v in row] for row in rows[: args.limit]]
    widths = [max([len(c), *(len(r[i]) for r in shown)]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    print("  ".join("-" * w for w in widths))
    for r in shown:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if len(rows) > args.limit:
        print(f"... (more than {args.limit} rows; use --limit)")
    return 0
