"""`dbt`: run any dbt command against the project with the platform's settings (e.g. `dbt docs generate`)."""

from __future__ import annotations

import argparse

HELP = "run a dbt command in dbt_project/ with the platform settings (e.g. `dbt docs generate`, `dbt test`)"
ARGS = {"dbt_args": {"nargs": argparse.REMAINDER, "help": "arguments passed to dbt"}}


def run(args: argparse.Namespace) -> int:
    from logistics_platform.lib.transform.project import run_dbt
    from logistics_platform.settings import DBT_PROJECT_DIR, load_settings

    # Artifacts (docs included) land in dbt_project/target/ as with a plain `dbt` there.
    dbt_args = list(args.dbt_args) or ["--help"]
    return run_dbt(
        load_settings(), dbt_args, target_path=DBT_PROJECT_DIR / "target", check=False, echo=print
    ).returncode
