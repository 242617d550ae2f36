"""`accept-type`: the way out of a schema incident (docs/operations.md, "Schema incidents"): the column made text,
then the hours it touched re-ingested whole and what is downstream built, as `run --partitions` does."""

from __future__ import annotations

import argparse

HELP = "accept a bronze column's incompatible new type as text, then re-ingest the hours it touched"
DESCRIPTION = __doc__
ARGS = {"table": {"help": "the bronze table the schema_incident check names"}, "column": {"help": "its column"}}


def run(args: argparse.Namespace) -> int:
    from logistics_platform.cli.render import render_summary
    from logistics_platform.lib.bronze.incidents import accept_as_text, replayed
    from logistics_platform.lib.connections import catalog_of
    from logistics_platform.lib.timekeys import hour_key
    from logistics_platform.pipeline import run_pipeline
    from logistics_platform.settings import load_settings

    settings = load_settings()
    catalog = catalog_of(settings)
    keys = [hour_key(h) for h in accept_as_text(catalog, args.table, args.column)]
    print(f"bronze.{args.table}.{args.column} is text now; re-ingesting {len(keys)} arrival hours", flush=True)
    summary = run_pipeline(settings, keys, replace=True) if keys else None
    if summary is not None:
        print(render_summary(summary))
    if summary is not None and not summary.ok:
        print(f"the replay did not finish: run `logistics-platform accept-type {args.table} {args.column}` again")
        return 1
    replayed(catalog, args.table, args.column)
    return 0
