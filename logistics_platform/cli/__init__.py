"""`logistics-platform`: one module per sub-command declaring ``HELP``, optionally ``DESCRIPTION``, ``ARGS`` (flag ->
argparse options, ``group`` a ``--help`` heading) or ``ACTIONS`` (name -> (help, ARGS)), and ``run(args)``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from logistics_platform.cli.errors import OneLineParser, report

# Sub-command modules, in the order of `--help`; the command is the module's name with dashes.
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


def add_arguments(parser: argparse.ArgumentParser, table: Mapping[str, Mapping[str, Any]]) -> None:
    """``parser.add_argument`` for each row of an ``ARGS`` table, in argument groups where a row names one."""
    groups: dict[str, Any] = {}
    for flag, options in table.items():
        options = dict(options)
        title = options.pop("group", None)
        target = parser if title is None else groups.setdefault(title, parser.add_argument_group(title))
        target.add_argument(flag, **options)


def add_command(sub: Any, module: ModuleType) -> None:
    name = module.__name__.rsplit(".", 1)[-1].replace("_", "-")
    parser = sub.add_parser(name, help=module.HELP, description=getattr(module, "DESCRIPTION", None))
    add_arguments(parser, getattr(module, "ARGS", {}))
    actions = getattr(module, "ACTIONS", None)
    if actions:
        chosen = parser.add_subparsers(dest=f"{name}_action", required=True, metavar="ACTION")
        for action, (text, table) in actions.items():
            add_arguments(chosen.add_parser(action, help=text), table)
    parser.set_defaults(func=module.run)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="logistics-platform",
        description="Logistics lakehouse: landing zone -> Iceberg bronze -> dbt marts, run through Dagster.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback of an error instead of its one-line summary"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        add_command(sub, importlib.import_module(f"logistics_platform.cli.{name}"))
    return parser


def main(argv: list[str] | None = None) -> int:
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
