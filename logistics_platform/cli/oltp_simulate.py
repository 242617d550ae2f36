"""`oltp-simulate`: apply a realistic stream of OLTP transactions to the database behind OLTP_DSN."""

from __future__ import annotations

import argparse
import sys
from contextlib import closing

HELP = "create the OLTP schema when missing and apply inserts, updates and deletes in transactions"
DESCRIPTION = (
    "Orders through their statuses, payments captured and refunded, tenant tier changes, courier deletes, against "
    "OLTP_DSN (the source that `capture` reads)."
)
ARGS = {
    "--changes": {"type": int, "default": 1000, "help": "row changes to apply (default 1000)"},
    "--seed": {"type": int, "default": 7, "help": "random seed (default 7)"},
    "--dsn": {"help": "OLTP database DSN (default: the OLTP_DSN setting)"},
    "--coordinates-after": {"type": int, "help": "add the orders' coordinates after N changes (ALTER TABLE)"},
}


def run(args: argparse.Namespace) -> int:
    import psycopg2

    from logistics_platform.lib.capture.simulate import simulate
    from logistics_platform.settings import SettingsError, load_settings

    try:
        dsn = args.dsn or load_settings().oltp_dsn
    except SettingsError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if not dsn:
        print("oltp-simulate: OLTP_DSN is not set; set it (or pass --dsn) to the OLTP database", file=sys.stderr)
        return 1
    if args.changes < 0 or (args.coordinates_after or 0) < 0:
        print("oltp-simulate: --changes and --coordinates-after must be 0 or more", file=sys.stderr)
        return 2
    try:
        conn = psycopg2.connect(dsn)
    except psycopg2.OperationalError as exc:
        first = (str(exc).strip().splitlines() or ["connection failed"])[0]
        print(f"oltp-simulate: cannot connect to the OLTP database ({first}); check OLTP_DSN", file=sys.stderr)
        return 1
    with closing(conn):
        print(simulate(conn, args.changes, seed=args.seed, coordinates_after=args.coordinates_after).render())
    return 0
