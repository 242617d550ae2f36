"""`logistics-platform` command line: one module per sub-command, each with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import importlib
import sys

# Sub-command modules; each module's register() adds its parser and sets ``func``.
COMMAND_MODULES = (
    "setup",
    "generate",
    "run",
    "maintain",
    "time_travel",
    "verify",
    "rebuild",
    "late",
    "dbt",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="logistics-platform",
        description="Logistics lakehouse: landing zone -> Iceberg bronze -> dbt marts, run through Dagster.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"logistics_platform.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
