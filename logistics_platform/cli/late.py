"""`late`: inspect late events and fold a window's late events back into the windowed marts."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

HELP = "list late events per window, or fold a window's late events back into the windowed marts"
DESCRIPTION = (
    "Late events update state but not event-time windows (marts.late_events lists them). `late fold` records the "
    "window in ops.folded_windows, so every later build (incremental or full) counts them, and rebuilds the windowed "
    "marts and late_events for that window now."
)
WINDOW_HELP = "hour start of the event-time window, UTC, e.g. 2026-11-02T03:00"
ACTIONS = {
    "list": (
        "late events per topic and window (from marts.late_events)",
        {"--limit": {"type": int, "default": 50, "help": "windows to show (default 50, most late events first)"}},
    ),
    "fold": (
        "fold the late events of one window back in",
        {
            "--topic": {"required": True, "help": "orders or tracking_pings (or the full topic name)"},
            "--window-start": {"required": True, "type": datetime.fromisoformat, "help": WINDOW_HELP},
            "--no-build": {"action": "store_true", "help": "only record the fold; the next dbt run applies it"},
        },
    ),
}


def run(args: argparse.Namespace) -> int:
    from logistics_platform.lib import connections as duck
    from logistics_platform.lib.transform.late import fold_window
    from logistics_platform.lib.transform.project import DbtError
    from logistics_platform.settings import load_settings

    settings = load_settings()
    if args.late_action == "list":
        with duck.connect(settings.duckdb_path, read_only=True, settings=settings) as con:
            con.sql(
                "select topic, window_start, count(*) as late_events, max(lateness_seconds) as max_lateness_s "
                f"from marts.late_events group by all order by late_events desc, window_start limit {int(args.limit)}"
            ).show()
        return 0
    try:
        result = fold_window(settings, args.topic, args.window_start, build=not args.no_build, echo=print)
    except DbtError as exc:
        print(
            f"late fold: the fold is recorded but the rebuild failed; re-run the same command.\n{exc}", file=sys.stderr
        )
        return 1
    state = "recorded" if result.newly_recorded else "was already recorded"
    print(
        f"fold of {result.topic} window {result.window_start:%Y-%m-%d %H:00} {state}; "
        f"late events left out of the window: {result.late_events_before} -> {result.late_events_after}"
    )
    return 0
