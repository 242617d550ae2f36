"""`rebuild` sub-command (placeholder until its capability lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rebuild", help="(not available yet)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("rebuild: not available yet")
    return 2
