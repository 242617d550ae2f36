"""`dbt-worker` sub-command: see or stop the warm dbt worker of the configured DuckDB file."""

from __future__ import annotations

import argparse

from logistics_platform.lib.transform.dbt_worker import log_path, socket_path, stop_worker, worker_status
from logistics_platform.settings import load_settings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dbt-worker",
        help="status or stop of the warm dbt worker (DBT_WORKER=auto)",
        description="The dbt steps hand their invocations to a warm dbt process that outlives the runs; it starts "
        "on first use and exits after DBT_WORKER_IDLE_MINUTES without work or when the code changes. `stop` ends "
        "it between invocations (the next dbt step starts a new one).",
    )
    p.add_argument("action", choices=("status", "stop"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings()
    where = f"{socket_path(settings.duckdb_path)} (DuckDB file {settings.duckdb_path})"
    if args.action == "stop":
        print(f"stopped the dbt worker on {where}" if stop_worker(settings.duckdb_path) else f"no worker on {where}")
        return 0
    status = worker_status(settings.duckdb_path)
    if status is None:
        print(f"no worker on {where} (DBT_WORKER={settings.dbt_worker}; one starts with the next dbt step)")
        return 0
    code = "current" if status["current_code"] else "older code (it exits at the next call)"
    print(
        f"dbt worker pid {status['pid']} on {where}: up since {status['since']}, {status['invocations']} "
        f"invocations, {code}; log {log_path(settings.duckdb_path)}"
    )
    return 0
