"""`generate` sub-command (placeholder until its capability lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="(not available yet)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("generate: not available yet")
    return 2
