"""`time-travel` sub-command: query an Iceberg table as of a timestamp, a tag or a snapshot id."""

from __future__ import annotations

import argparse

HELP = "query a table as of a timestamp, tag (daily-YYYY-MM-DD) or snapshot id"
DESCRIPTION = (
    "Answer a DuckDB query from one snapshot of an Iceberg table. The table is visible as a relation named after it "
    "(e.g. `orders` and `bronze.orders`)."
)
ARGS = {
    "table": {"help": "namespace.table, or a bronze table name such as orders"},
    "--as-of": {
        "required": True,
        "help": "ISO timestamp (UTC if no zone, e.g. 2026-11-02T10:00), a tag/branch (daily-2026-11-02) or a "
        "snapshot id",
    },
    "--sql": {"help": "query to run (default: select count(*) from <table>)"},
    "--limit": {"type": int, "default": 50, "help": "rows to print at most (default 50)"},
}


def run(args: argparse.Namespace) -> int:
    import duckdb
    from pyiceberg.exceptions import NoSuchTableError

    from logistics_platform.cli.errors import USAGE, CommandError, print_table
    from logistics_platform.lib.connections import catalog_of, connect
    from logistics_platform.lib.maintenance.tags import iceberg_scan_sql, query_as_of, query_error
    from logistics_platform.settings import load_settings

    settings = load_settings()
    identifier = args.table if "." in args.table else f"bronze.{args.table}"
    try:
        table = catalog_of(settings).load_table(identifier)
    except NoSuchTableError:
        raise CommandError(f"no Iceberg table {identifier}; run `logistics-platform run` first", USAGE) from None
    name = identifier.split(".")[-1]
    con = connect(settings=settings)
    # A query that does not bind raises TimeTravelError (a ValueError): errors.report makes it one line, exit 2.
    resolved, rel = query_as_of(con, table, args.as_of, args.sql or f'select count(*) as "rows" from "{name}"')
    print(
        f"{identifier} as of {args.as_of}: snapshot {resolved.snapshot_id} "
        f"(committed {resolved.committed_at:%Y-%m-%d %H:%M:%S} UTC, from {resolved.resolved_from})"
    )
    print(f"-- same in DuckDB: select ... from {iceberg_scan_sql(table, resolved.snapshot_id)}")
    try:
        rows = rel.fetchmany(args.limit + 1)
    except duckdb.Error as exc:  # errors that show only when the query runs (a failed cast, ...)
        raise CommandError(query_error(exc, table.name()[-2], table.name()[-1]), USAGE) from None
    print_table([list(rel.columns), *([("NULL" if v is None else str(v)) for v in row] for row in rows[: args.limit])])
    if len(rows) > args.limit:
        print(f"... (more than {args.limit} rows; use --limit)")
    return 0
