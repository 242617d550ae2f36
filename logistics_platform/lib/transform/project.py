"""Running the dbt project: the arrival-hour window as dbt vars, and dbt as a child process.

dbt runs in its own process with the environment of :func:`settings.subprocess_env`, so that the dbt-duckdb plugin
(which builds its Settings from that environment) sees the same catalog, warehouse and DuckDB file as the caller.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from logistics_platform.settings import DBT_PROJECT_DIR, Settings, subprocess_env

HOUR = timedelta(hours=1)
VAR_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
# The dbt marts of marts.md, in the order the publish step writes them.
MART_MODELS = (
    "fct_orders",
    "dim_tenant",
    "dim_courier",
    "fct_deliveries",
    "fct_daily_revenue",
    "fct_hourly_region_orders",
    "fct_courier_hourly_activity",
    "late_events",
    "fct_region_sla",
    "fct_region_delivery_daily",
    "fct_courier_gps_jumps",
)
WINDOWED_MARTS = ("fct_hourly_region_orders", "fct_courier_hourly_activity", "late_events")


class DbtError(RuntimeError):
    """A dbt invocation failed; the message carries the tail of its output."""


def window_vars(first_hour: datetime, last_hour: datetime | None = None) -> dict[str, str]:
    """dbt vars for processing arrival hours ``first_hour`` .. ``last_hour`` (inclusive hour starts)."""
    first = first_hour.replace(minute=0, second=0, microsecond=0, tzinfo=None)
    last = (last_hour or first_hour).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    if last < first:
        raise ValueError(f"arrival window ends ({last}) before it starts ({first}); pass the hours in order")
    return {"min_arrival_hour": first.strftime(VAR_TIME_FORMAT), "max_arrival_hour": last.strftime(VAR_TIME_FORMAT)}


def window_vars_from_range(start: datetime, end: datetime) -> dict[str, str]:
    """dbt vars for a half-open Dagster time window [start, end) of whole hours."""
    return window_vars(start, end - HOUR)


def window_env(dbt_vars: dict[str, str]) -> dict[str, str]:
    """The same window as environment variables (LOGISTICS_DBT_MIN_ARRIVAL_HOUR, ...), read by the dbt macros.

    Passing the window this way keeps dbt's partial parsing: a changed ``--vars`` forces a full re-parse of the
    project on every run (about 10 s on 2 busy cores), an env var read only at run time does not.
    """
    return {f"LOGISTICS_DBT_{name.upper()}": value for name, value in dbt_vars.items()}


def dbt_executable() -> str:
    """The dbt installed beside this interpreter, whether or not the venv is on PATH."""
    return str(Path(sys.executable).parent / "dbt")


def dbt_args(
    settings: Settings,
    command: Sequence[str],
    dbt_vars: dict[str, Any] | None = None,
    target_path: Path | None = None,
) -> list[str]:
    """Full dbt command line for ``command`` (e.g. ``["build", "--select", "marts"]``) on our project."""
    args = [
        dbt_executable(),
        *command,
        "--project-dir",
        str(DBT_PROJECT_DIR),
        "--profiles-dir",
        str(DBT_PROJECT_DIR),
        "--target",
        settings.dbt_target,
    ]
    if dbt_vars:
        args += ["--vars", json.dumps(dbt_vars)]
    if target_path is not None:
        args += ["--target-path", str(target_path)]
    return args


@dataclass
class DbtRun:
    """What one dbt invocation did."""

    args: list[str]
    returncode: int
    seconds: float
    output: str
    timings: dict[str, float] = field(default_factory=dict)
    # Seconds from launching dbt to its first node starting: interpreter, project, manifest and connection set-up.
    startup_seconds: float | None = None
    # One dict per node, in the shape of run_results.json's "results" (unique_id, status, timing, execution_time, ...).
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def node_results(target_path: Path) -> list[dict[str, Any]]:
    """The node results of the last invocation in ``target_path`` (dbt's run_results.json), or none."""
    path = target_path / "run_results.json"
    if not path.exists():
        return []
    return list(json.loads(path.read_text()).get("results", []))


def forget_results(target_path: Path) -> None:
    """Remove the last invocation's run_results.json, so a run that fails before writing its own reports none."""
    (target_path / "run_results.json").unlink(missing_ok=True)


def first_node_started(results: list[dict[str, Any]]) -> datetime | None:
    """When the first node started (UTC, naive)."""
    starts = [
        datetime.fromisoformat(t["started_at"].rstrip("Z")).replace(tzinfo=None)
        for r in results
        for t in r.get("timing", [])
        if t.get("started_at")
    ]
    return min(starts) if starts else None


def seconds_to_first_node(results: list[dict[str, Any]], launched: datetime) -> float | None:
    """Seconds from ``launched`` (UTC, naive) to the first node starting; None if no node ran."""
    first = first_node_started(results)
    return (first - launched).total_seconds() if first and first >= launched else None


def model_timings(results: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per node (model name -> execution time)."""
    return {r["unique_id"].split(".")[-1]: float(r.get("execution_time") or 0.0) for r in results}


def run_dbt(
    settings: Settings,
    command: Sequence[str],
    dbt_vars: dict[str, Any] | None = None,
    *,
    target_path: Path | None = None,
    check: bool = True,
    echo: Callable[[str], None] | None = None,
    window: dict[str, str] | None = None,
) -> DbtRun:
    """Run dbt in a child process; raise :class:`DbtError` with the output tail if it fails and ``check``.

    ``dbt_vars`` go on the command line; ``window`` (from :func:`window_vars`) goes through the environment.
    """
    args = dbt_args(settings, command, dbt_vars, target_path)
    settings.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    env = subprocess_env(settings)
    env.update(window_env(window or {}))
    if target_path is not None:
        # Logs beside the target: parallel runs (tests, benchmarks) must not share dbt_project/logs.
        env["DBT_LOG_PATH"] = str(target_path / "logs")
    artifacts = target_path or DBT_PROJECT_DIR / "target"
    forget_results(artifacts)
    launched = datetime.now(UTC).replace(tzinfo=None)
    started = time.perf_counter()
    proc = subprocess.Popen(
        args, cwd=DBT_PROJECT_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if echo is not None:
            echo(line.rstrip("\n"))
    returncode = proc.wait()
    results = node_results(artifacts)
    run = DbtRun(
        args=args,
        returncode=returncode,
        seconds=time.perf_counter() - started,
        output="".join(lines),
        timings=model_timings(results),
        startup_seconds=seconds_to_first_node(results, launched),
        results=results,
    )
    if check and not run.ok:
        tail = "".join(lines[-40:])
        raise DbtError(
            f"dbt {' '.join(command)} failed with exit code {returncode}. Last output:\n{tail}\n"
            "Fix the failing model or test above, then re-run the same window: every window is idempotent."
        )
    return run
