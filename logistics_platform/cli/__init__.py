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
    "capture",
    "oltp_simulate",
    "dashboard",
)


def build_parser() -> argparse.ArgumentParser:
    from logistics_platform.cli.errors import OneLineParser

    parser = OneLineParser(
        prog="logistics-platform",
        description="Logistics lakehouse: landing zone -> Iceberg bronze -> dbt marts, run through Dagster.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback of an error instead of its one-line summary"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"logistics_platform.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    from logistics_platform.cli.errors import report

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        return report(args.command, exc)


if __name__ == "__main__":
    sys.exit(main())
