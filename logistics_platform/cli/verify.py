"""`verify`: compare the landing zone with what bronze recorded in ``bronze.ingest_log``, hour by hour.

Reports hours never ingested, changed since their ingest (a delayed upload), with a corrupt file, or unbalanced (landed
lines = rows + quarantined + tombstones, per topic), and files under the landing root that are not read (a warning).
The current hour is open: it fails only when a logged file changed. Exit code 0 when everything is ingested and
balanced, 1 otherwise (docs/operations.md).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from logistics_platform.lib.timekeys import hour_key, parse_hour_key

if TYPE_CHECKING:
    from logistics_platform.lib.operate.progress import HourReport

HELP = "compare landed files with bronze.ingest_log: hours never ingested, changed since, accounting"
DESCRIPTION = __doc__
ARGS = {
    "--hour": {"action": "append", "metavar": "YYYY-MM-DD-HH:MM", "help": "only these arrival hours"},
    "--all": {"action": "store_true", "help": "print every hour, not only the ones with a problem"},
    "--json": {"action": "store_true", "help": "machine-readable output"},
}


def run(args: argparse.Namespace) -> int:
    from logistics_platform.cli.errors import USAGE, CommandError, require_landing_dir
    from logistics_platform.lib.bronze.unread import unread_files
    from logistics_platform.lib.connections import catalog_of
    from logistics_platform.lib.operate.landing_watch import scan_landing
    from logistics_platform.lib.operate.progress import compare, read_corrupt_files, read_ingest_log
    from logistics_platform.settings import load_settings

    settings = load_settings()
    require_landing_dir(settings.landing_dir)
    hours = args.hour or None
    for h in hours or ():
        try:
            parse_hour_key(h)
        except ValueError as exc:
            raise CommandError(f"--hour: {exc}", USAGE) from None
    scan = scan_landing(settings.landing_dir, lookback_days=None, hours=hours)
    catalog = catalog_of(settings)
    logged, corrupt = read_ingest_log(catalog, hours), read_corrupt_files(catalog, hours)
    reports = compare(scan, logged, settings.landing_dir, corrupt, now=datetime.now(UTC))
    problems = [r for r in reports if not r.ok]
    unread = unread_files(settings.landing_dir)
    if hours is not None:
        unread = {p: why for p, why in unread.items() if _hour_of(p) in hours}
    if args.json:
        by_hour: dict[str | None, dict[str, str]] = {}
        for path, why in unread.items():
            by_hour.setdefault(_hour_of(path), {})[path] = why
        print(json.dumps([{**_as_dict(r), "unread_files": by_hour.get(r.hour, {})} for r in reports], indent=2))
        return 1 if problems else 0

    shown = reports if args.all else [r for r in reports if not r.ok or r.status == "open"]
    for r in shown:
        opened = r.status == "open"
        state = f"OPEN, {r.ingested_files} files ingested, {r.pending_files} new" if opened else r.status.upper()
        print(f"{r.hour}  {state}")
        for topic, why in sorted(r.stale.items()):
            what = "never ingested" if why == "never" else "new files" if opened else "files changed since ingest"
            print(f"    {topic}: {what}")
        for name in [] if opened else r.new_files:  # an open hour's new files are its usual state: counted above
            print(f"    new file: {name}")
        for name, why in sorted(r.corrupt_files.items()):
            print(f"    corrupt file: {name}: {why}")
        for e in r.entries:
            mark = "ok" if e.balanced else "UNBALANCED"
            print(
                f"    {e.topic:<28} lines {e.lines:>8} = rows {e.rows:>8} + quarantined {e.quarantined:>6} "
                f"+ tombstones {e.tombstones:>6}  {mark}"
            )
    if unread:
        print(f"files not read: {len(unread)} (not landing files of the contract; nothing counts them)")
        for path, why in unread.items():
            print(f"    {path}: {why}")
    counts = Counter(r.status for r in reports)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no hours landed or ingested"
    print(f"{len(reports)} hours: {summary}")
    if problems:
        keys = [r.hour for r in problems if r.status in ("never_ingested", "changed", "partial")]
        if keys:
            print(
                "repair: re-run these partitions of job ingest_arrival_hours (UI: Jobs > ingest_arrival_hours > "
                f"Launch backfill), or `logistics-platform run --partitions {keys[0]}` for one hour"
            )
        if any(r.status == "corrupt" for r in problems):
            print(
                "corrupt hours: their readable lines are in bronze; have the producer re-deliver the named files "
                "(the sensor re-ingests the hour when a file changes)"
            )
        if any(r.status == "unbalanced" for r in problems):
            print("unbalanced hours: lines are missing from bronze; re-run the hour, then check bronze.quarantine")
    return 1 if problems else 0


def _hour_of(relpath: str) -> str | None:
    """The arrival-hour key of a path inside an hour folder (``topics/<topic>/dt=../hr=../..``), else None."""
    parts = relpath.split("/")
    try:
        return hour_key(datetime.strptime(f"{parts[2]} {parts[3]}", "dt=%Y-%m-%d hr=%H")) if len(parts) >= 5 else None
    except ValueError:
        return None


def _as_dict(r: HourReport) -> dict[str, object]:
    """The report as JSON: its fields, the log rows' counts as ``accounting``."""
    counts = ("topic", "lines", "rows", "quarantined", "tombstones", "balanced")
    out = {k: v for k, v in vars(r).items() if k != "entries"}
    return {**out, "accounting": [{k: getattr(e, k) for k in counts} for e in r.entries]}
