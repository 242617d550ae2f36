"""`capture`: land the OLTP database's changes (logical replication, or polling with --mode query), then exit."""

from __future__ import annotations

import argparse
import sys

HELP = "drain the OLTP database's changes into the landing zone as Debezium events, then exit"
DESCRIPTION = (
    "Reads the changes committed in the OLTP database (OLTP_DSN) through a logical replication slot (created with a "
    "consistent snapshot on first use) and lands them in LANDING_DIR; the slot is confirmed only once the files are "
    "durable. --mode query polls by updated_at instead (no deletes)."
)
ARGS = {
    "--mode": {"choices": ("logical", "query"), "default": "logical", "help": "default logical"},
    "--resnapshot": {
        "action": "store_true",
        "help": "drop the slot (if any) and start again from a new snapshot (after the slot was lost or invalidated)",
    },
    "--dsn": {"help": "OLTP database DSN (default: the OLTP_DSN setting)"},
}


def run(args: argparse.Namespace) -> int:
    from logistics_platform.lib.capture.runner import run_capture
    from logistics_platform.lib.capture.slot import CaptureError
    from logistics_platform.settings import SettingsError, load_settings

    try:
        settings = load_settings()
        if args.dsn:
            settings = settings.with_overrides(oltp_dsn=args.dsn)
        result = run_capture(settings, mode=args.mode, resnapshot=args.resnapshot)
    except (CaptureError, SettingsError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(result.render())
    return 0
