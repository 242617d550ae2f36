"""dbt through dagster-dbt: the window dbt sees, the settings' ``DbtProject``, :func:`run_dbt` (no Dagster run)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logistics_platform.lib.transform.spark import is_spark, write_spark_conf
from logistics_platform.settings import DBT_PROJECT_DIR, Settings, dbt_env, dbt_environment

if TYPE_CHECKING:  # imported where used: dagster-dbt and dbt take seconds to load
    from dagster_dbt import DbtCliResource, DbtProject

VAR_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
PROJECT_FILES = ("*.yml", "models/**/*", "macros/**/*", "seeds/**/*", "tests/**/*")  # what a parse reads
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
    "fct_courier_off_route",
)


class DbtError(RuntimeError):
    """A dbt invocation failed; the message carries the tail of its output."""


def window_vars(first_hour: datetime, last_hour: datetime | None = None) -> dict[str, str]:
    """dbt vars for processing arrival hours ``first_hour`` .. ``last_hour`` (inclusive hour starts)."""
    first = first_hour.replace(minute=0, second=0, microsecond=0, tzinfo=None)
    last = (last_hour or first_hour).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    if last < first:
        raise ValueError(f"arrival window ends ({last}) before it starts ({first}); pass the hours in order")
    return {"min_arrival_hour": first.strftime(VAR_TIME_FORMAT), "max_arrival_hour": last.strftime(VAR_TIME_FORMAT)}


def window_env(dbt_vars: dict[str, str]) -> dict[str, str]:
    """The window as environment variables read by the dbt macros (a changed ``--vars`` re-parses the project)."""
    return {f"LOGISTICS_DBT_{name.upper()}": value for name, value in dbt_vars.items()}


def dbt_executable(settings: Settings | None = None) -> str:
    """The dbt of the settings' target: Spark's venv's for the `spark` target, else the one beside this interpreter."""
    if settings is not None and is_spark(settings):
        return str(settings.spark_venv / "bin" / "dbt")
    return str(Path(sys.executable).parent / "dbt")


def target_environment(settings: Settings) -> dict[str, str]:
    """Environment a dbt process of the settings' target needs beyond the settings (the Spark conf directory)."""
    return {"SPARK_CONF_DIR": str(write_spark_conf(settings))} if is_spark(settings) else {}


def dbt_resource(settings: Settings) -> DbtCliResource:
    """dagster-dbt's dbt CLI resource on this project and the settings' target (see :mod:`.dbt_cli`)."""
    from logistics_platform.lib.transform.dbt_cli import PlatformDbtCliResource

    return PlatformDbtCliResource(
        project_dir=str(DBT_PROJECT_DIR),
        profiles_dir=str(DBT_PROJECT_DIR),
        target=settings.dbt_target,
        dbt_executable=dbt_executable(settings),
    )


def project_target(settings: Settings) -> Path:
    """The target path of the settings' ``DbtProject``: manifest, partial-parse state, one directory per run."""
    # Keyed by the dbt environment too: dbt keeps its partial-parse state only for the profile values and project
    # environment variables it was parsed with, so settings that share a target and database name (two deployments
    # of one checkout, a benchmark beside `make run`) would otherwise make every run of the other parse in full.
    digest = hashlib.blake2b(json.dumps(dbt_env(settings), sort_keys=True).encode(), digest_size=4).hexdigest()
    return DBT_PROJECT_DIR / "target" / f"{settings.dbt_target}-{settings.duckdb_database}-{digest}"


def prepare_manifest(settings: Settings) -> Path:
    """``dbt parse`` into the settings' project target, as dagster-dbt's preparer does, with the settings' dbt."""
    target = project_target(settings)
    target.mkdir(parents=True, exist_ok=True)
    # Parsed aside, then moved in: processes loading the definitions at once never read a half-written manifest.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".parse-{target.name}-") as scratch:
        run_dbt(settings, ["parse", "--quiet"], target_path=Path(scratch))
        for name in ("partial_parse.msgpack", "manifest.json"):
            if (Path(scratch) / name).exists():
                (Path(scratch) / name).replace(target / name)
    return target / "manifest.json"


def dbt_project(settings: Settings) -> DbtProject:
    """The dbt project for ``settings``, its manifest parsed when missing, and like ``prepare_if_dev()`` under ``dagster
    dev`` but only if a project file is newer (run workers load it too); a deployment parses in ``setup``."""
    from dagster_dbt import DbtProject

    project = DbtProject(
        project_dir=DBT_PROJECT_DIR,
        target=settings.dbt_target,
        target_path=project_target(settings).relative_to(DBT_PROJECT_DIR),
    )
    edited = max(p.stat().st_mtime for pattern in PROJECT_FILES for p in DBT_PROJECT_DIR.glob(pattern))
    missing = not project.manifest_path.exists()
    if missing or (project.preparer.using_dagster_dev() and edited > project.manifest_path.stat().st_mtime):
        prepare_manifest(settings)
    return project


def prune_run_targets(runs_dir: Path, keep: int = 48) -> list[Path]:
    """Delete all but the ``keep`` newest per-invocation directories (artifacts, dbt.log) under ``runs_dir``."""
    if not runs_dir.is_dir():
        return []
    runs = sorted((p for p in runs_dir.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in runs[keep:]:
        shutil.rmtree(path, ignore_errors=True)
    return runs[keep:]


def keep_parse_state(run_target: Path, target: Path) -> None:
    """Seed the project target's partial-parse state from a run's when it has none: dagster-dbt copies it into each
    run's directory, so without it every invocation of settings that were never prepared parses the whole project."""
    state = run_target / "partial_parse.msgpack"
    if state.exists() and not (target / state.name).exists():
        target.mkdir(parents=True, exist_ok=True)
        scratch = target / f".{state.name}.{run_target.name}"
        shutil.copyfile(state, scratch)
        scratch.replace(target / state.name)  # whole or not at all, for a concurrent invocation


@contextlib.contextmanager
def dbt_invocation_environment(settings: Settings, window: dict[str, str] | None = None) -> Iterator[None]:
    """The environment of one ``DbtCliResource.cli`` call: settings, target, window, runs under ``DBT_TARGET_PATH``."""
    target = project_target(settings)
    prune_run_targets(target)
    extra = {**target_environment(settings), **window_env(window or {}), "DBT_TARGET_PATH": str(target)}
    with dbt_environment(settings, extra):
        yield


@dataclass
class DbtRun:
    """What one dbt invocation did (``results`` as in run_results.json)."""

    returncode: int
    seconds: float
    output: str
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0


SELECTION_FLAGS = frozenset({"--select", "-s", "--models", "-m", "--exclude"})


def join_selection_values(args: Sequence[str]) -> list[str]:
    """``args`` with the values after each ``--select``/``--exclude`` joined by spaces (``.cli`` takes one value)."""
    joined: list[str] = []
    selecting = False
    for arg in args:
        if selecting and not arg.startswith("-") and joined[-1] not in SELECTION_FLAGS:
            joined[-1] += f" {arg}"
        else:
            joined.append(arg)
        selecting = arg in SELECTION_FLAGS or (selecting and not arg.startswith("-"))
    return joined


class _Output(io.StringIO):
    """Keeps what is written to it, handing each complete line to ``echo`` too (with the stdout of its creation)."""

    def __init__(self, echo: Callable[[str], None] | None) -> None:
        super().__init__()
        self._echo, self._stdout, self._partial = echo, sys.stdout, ""

    def write(self, text: str) -> int:
        if self._echo is not None:
            *complete, self._partial = (self._partial + text).split("\n")
            with contextlib.redirect_stdout(self._stdout):
                for line in complete:
                    self._echo(line)
        return super().write(text)


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
    """Run one dbt command (``dbt_vars`` on its command line, ``window`` in its environment, each output line to
    ``echo``); raise :class:`DbtError` if it fails and ``check``."""
    args = [*join_selection_values(command), *(["--vars", json.dumps(dbt_vars)] if dbt_vars else [])]
    started = time.perf_counter()
    output = _Output(echo)
    if target_path is not None:  # a reused directory: a run that fails before writing its results reports none
        (target_path / "run_results.json").unlink(missing_ok=True)
    # dagster-dbt writes dbt's log lines to sys.stdout as it reads them: they are this call's output.
    with contextlib.redirect_stdout(output):
        with dbt_invocation_environment(settings, window):
            invocation = dbt_resource(settings).cli(args, target_path=target_path, raise_on_error=False)
        invocation.wait()
    returncode = invocation.process.wait()
    keep_parse_state(invocation.target_path, project_target(settings))
    results_file = invocation.target_path / "run_results.json"
    results = json.loads(results_file.read_text()).get("results", []) if results_file.exists() else []
    run = DbtRun(returncode, time.perf_counter() - started, output.getvalue(), list(results))
    if check and not run.ok:
        tail = "\n".join(output.getvalue().splitlines()[-40:])
        raise DbtError(
            f"dbt {' '.join(command)} failed with exit code {returncode}. Last output:\n{tail}\n"
            f"Full log: {invocation.target_path / 'dbt.log'}. "
            "Fix the failing model or test above, then re-run the same window: every window is idempotent."
        )
    return run
