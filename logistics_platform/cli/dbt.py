"""`dbt`: run any dbt command against the project with the platform's settings (e.g. `dbt docs generate`)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dbt",
        help="run a dbt command in dbt_project/ with the platform settings (e.g. `dbt docs generate`, `dbt test`)",
    )
    p.add_argument("dbt_args", nargs=argparse.REMAINDER, help="arguments passed to dbt")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from logistics_platform.settings import DBT_PROJECT_DIR, load_settings, subprocess_env

    settings = load_settings()
    dbt = Path(sys.executable).parent / "dbt"
    dbt_args = list(args.dbt_args) or ["--help"]
    cmd = [str(dbt), *dbt_args]
    if dbt_args[0] not in ("--help", "--version"):
        cmd += ["--project-dir", str(DBT_PROJECT_DIR), "--profiles-dir", str(DBT_PROJECT_DIR)]
    return subprocess.run(cmd, cwd=DBT_PROJECT_DIR, env=subprocess_env(settings), check=False).returncode
