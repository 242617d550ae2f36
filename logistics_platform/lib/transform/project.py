"""Running the dbt project: the arrival-hour window, this checkout's manifest for the settings, and dbt itself.

dbt always runs through dagster-dbt's ``DbtCliResource``: a dbt child process per invocation, which exits with the
invocation (nothing of ours outlives a run). The Dagster assets call it with their context (events, asset checks);
:func:`run_dbt` calls it without one for the CLI, the late-event fold, tests and benchmarks. The child sees the
settings through :func:`settings.dbt_environment` (profiles.yml and the dbt-duckdb plugin read them).

The manifest Dagster loads is parsed for these settings: the relations it names carry the DuckDB catalog name
(``settings.duckdb_database``) and the target, so it lives in ``dbt_project/target/<target>-<database>/`` with the
fingerprint of the project files it was parsed from, and is parsed again (offline: ``dbt parse`` opens no database)
when it is missing or the fingerprint differs. A manifest another run left elsewhere in ``target/`` is never read.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logistics_platform.lib.transform.spark import is_spark, spark_environment
from logistics_platform.settings import DBT_PROJECT_DIR, Settings, dbt_environment

if TYPE_CHECKING:  # imported where used: `setup` checks the manifest without loading dagster-dbt and dbt (seconds)
    from dagster_dbt import DbtCliResource, DbtProject

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
    project on every run (measured in benchmarks/README.md), an env var read only at run time does not.
    """
    return {f"LOGISTICS_DBT_{name.upper()}": value for name, value in dbt_vars.items()}


def dbt_executable(settings: Settings | None = None) -> str:
    """The dbt of the settings' target: Spark's venv's for the `spark` target, else the one beside this interpreter."""
    if settings is not None and is_spark(settings):
        return str(settings.spark_venv / "bin" / "dbt")
    return str(Path(sys.executable).parent / "dbt")


def target_environment(settings: Settings) -> dict[str, str]:
    """Environment a dbt process of the settings' target needs beyond the settings (the Spark conf directory)."""
    return spark_environment(settings) if is_spark(settings) else {}


def dbt_resource(settings: Settings) -> DbtCliResource:
    """dagster-dbt's dbt CLI resource on this project and the settings' target (see :mod:`.dbt_cli`)."""
    from logistics_platform.lib.transform.dbt_cli import PlatformDbtCliResource

    return PlatformDbtCliResource(
        project_dir=str(DBT_PROJECT_DIR),
        profiles_dir=str(DBT_PROJECT_DIR),
        target=settings.dbt_target,
        dbt_executable=dbt_executable(settings),
    )


# Files whose content goes into the parsed manifest.
PROJECT_GLOBS = ("dbt_project.yml", "profiles.yml", "models/**/*", "macros/**/*", "seeds/**/*", "tests/**/*")
MANIFEST_FILE = "manifest.json"
PARTIAL_PARSE_FILE = "partial_parse.msgpack"
FINGERPRINT_FILE = "project.sha256"


def manifest_key(settings: Settings) -> str:
    """Directory name under ``dbt_project/target/`` of the manifest for ``settings``: what the manifest depends on."""
    return f"{settings.dbt_target}-{settings.duckdb_database}"


def project_target(settings: Settings) -> Path:
    """The target directory holding the manifest (and partial-parse state) parsed for ``settings``."""
    return DBT_PROJECT_DIR / "target" / manifest_key(settings)


def project_fingerprint(settings: Settings, project_dir: Path = DBT_PROJECT_DIR) -> str:
    """Hash of what a parse of the project for ``settings`` reads: dbt's version, the key, every project file."""
    # The installed distribution's version (what dbt.version reports), without importing dbt.
    digest = hashlib.sha256(f"{version('dbt-core')}\0{manifest_key(settings)}".encode())
    files = sorted({p for pattern in PROJECT_GLOBS for p in project_dir.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(b"\0" + str(path.relative_to(project_dir)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def ensure_manifest(settings: Settings) -> Path:
    """The manifest of this checkout for ``settings``, parsed first if missing or stale (dbt is loaded only then)."""
    target = project_target(settings)
    fingerprint = project_fingerprint(settings)
    recorded = target / FINGERPRINT_FILE
    if not (target / MANIFEST_FILE).exists() or not recorded.exists() or recorded.read_text() != fingerprint:
        parse_manifest(settings, target, fingerprint)
    return target / MANIFEST_FILE


def dbt_project(settings: Settings) -> DbtProject:
    """The dbt project with the manifest of this checkout for ``settings``, parsed first if missing or stale."""
    from dagster_dbt import DbtProject

    # Not prepare_if_dev(): it parses only under `dagster dev`, with the `dbt` on PATH, into one target for every
    # settings. Definitions must find their own manifest in any process that loads them.
    ensure_manifest(settings)
    return DbtProject(
        project_dir=DBT_PROJECT_DIR,
        profiles_dir=DBT_PROJECT_DIR,
        target=settings.dbt_target,
        target_path=project_target(settings).relative_to(DBT_PROJECT_DIR),
    )


def parse_manifest(settings: Settings, target: Path, fingerprint: str) -> None:
    """``dbt parse`` into a fresh directory, then move manifest, partial-parse state and fingerprint into ``target``.

    Processes that load the definitions at once (a code server, run workers) may both parse: each file is replaced
    atomically and the fingerprint last, so a reader never pairs a new fingerprint with an old manifest.
    """
    scratch = target.parent / f".parse-{target.name}-{uuid.uuid4().hex[:8]}"
    try:
        seed_partial_parse(target, scratch)
        run_dbt(settings, ["parse"], target_path=scratch)
        target.mkdir(parents=True, exist_ok=True)
        for name in (MANIFEST_FILE, PARTIAL_PARSE_FILE):
            if (scratch / name).exists():
                (scratch / name).replace(target / name)
        staged = target / f".{FINGERPRINT_FILE}-{uuid.uuid4().hex[:8]}"
        staged.write_text(fingerprint)
        staged.replace(target / FINGERPRINT_FILE)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def seed_partial_parse(source_target: Path, target_path: Path) -> None:
    """Start a fresh target directory from the project's partial-parse state, so dbt re-parses only what changed.

    dbt itself decides whether the state is still valid (files, profile, env vars): a stale copy costs a full parse,
    never a wrong manifest.
    """
    source = source_target / PARTIAL_PARSE_FILE
    destination = target_path / PARTIAL_PARSE_FILE
    if source.exists() and not destination.exists():
        target_path.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)


def prune_run_targets(runs_dir: Path, keep: int = 48) -> list[Path]:
    """Delete all but the ``keep`` newest per-invocation target directories under ``runs_dir``; return the deleted.

    Each dbt invocation gets its own target directory (artifacts, dbt.log, partial-parse state); without pruning
    they would pile up by one per hourly run.
    """
    if not runs_dir.is_dir():
        return []
    runs = sorted((p for p in runs_dir.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    stale = runs[keep:]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def new_run_target(settings: Settings, label: str) -> Path:
    """A fresh target directory for one invocation (artifacts of concurrent runs never mix), old ones pruned.

    Seeded with the partial-parse state of the settings' manifest, so that dbt does not parse the whole project.
    """
    source = project_target(settings)
    prune_run_targets(source / "runs")
    target = source / "runs" / f"{label}-{uuid.uuid4().hex[:6]}"
    seed_partial_parse(source, target)
    return target


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


SELECTION_FLAGS = frozenset({"--select", "-s", "--models", "-m", "--exclude"})


def join_selection_values(args: Sequence[str]) -> list[str]:
    """``args`` with each ``--select``/``--exclude`` followed by ONE value: its values joined by spaces.

    dbt's own CLI takes several values after one flag (``--exclude a b``); ``DbtCliResource.cli`` takes one (it
    would pass ``b`` on as a stray argument), and the space-separated form means the same to dbt.
    """
    joined: list[str] = []
    values: list[str] | None = None
    for arg in args:
        if values is not None and not arg.startswith("-"):
            values.append(arg)
            continue
        if values is not None:
            joined.append(" ".join(values))
            values = None
        joined.append(arg)
        if arg in SELECTION_FLAGS:
            values = []
    if values is not None:
        joined.append(" ".join(values))
    return joined


class _Lines(io.TextIOBase):
    """A text stream that keeps what is written to it line by line, handing each line to ``echo`` too.

    ``echo`` runs with the stream that was ``sys.stdout`` when this one was made, so it may print.
    """

    def __init__(self, echo: Callable[[str], None] | None) -> None:
        self.lines: list[str] = []
        self._echo = echo
        self._partial = ""
        self._stdout = sys.stdout

    def write(self, text: str) -> int:
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            self.lines.append(line)
            if self._echo is not None:
                with contextlib.redirect_stdout(self._stdout):
                    self._echo(line)
        return len(text)


def keep_partial_parse(settings: Settings, run_target: Path) -> None:
    """Make the partial-parse state an invocation left in ``run_target`` the one the next invocations start from.

    dbt's state records the rendered profile (the DuckDB path among it): a state parsed for another path of the same
    target and database (a test's temporary directory) makes dbt parse the whole project again, and would do so on
    every run until the project changed. Taking the last run's state back heals that after one run.
    """
    source = run_target / PARTIAL_PARSE_FILE
    if source.exists():
        staged = project_target(settings) / f".{PARTIAL_PARSE_FILE}-{uuid.uuid4().hex[:8]}"
        shutil.copyfile(source, staged)
        staged.replace(project_target(settings) / PARTIAL_PARSE_FILE)


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
    """Run one dbt command through ``DbtCliResource`` (no Dagster context); raise :class:`DbtError` if it fails.

    ``dbt_vars`` go on the command line; ``window`` (from :func:`window_vars`) goes through the environment, as the
    Dagster assets pass it. Without ``target_path`` the invocation gets its own directory (:func:`new_run_target`).
    """
    # A run with --vars leaves a parse state for those vars: not one for the next runs to start from.
    own_target = target_path is None and not dbt_vars
    target = target_path or new_run_target(settings, "cli")
    args = [*join_selection_values(command), *(["--vars", json.dumps(dbt_vars)] if dbt_vars else [])]
    target.mkdir(parents=True, exist_ok=True)
    forget_results(target)
    launched = datetime.now(UTC).replace(tzinfo=None)
    started = time.perf_counter()
    lines = _Lines(echo)
    # dagster-dbt re-emits dbt's log lines on sys.stdout; they are this call's output.
    with contextlib.redirect_stdout(lines):
        with dbt_environment(settings, {**target_environment(settings), **window_env(window or {})}):
            invocation = dbt_resource(settings).cli(args, target_path=target, raise_on_error=False)
        for _event in invocation.stream_raw_events():
            pass
    returncode = invocation.process.wait()
    if own_target:
        keep_partial_parse(settings, target)
    results = node_results(target)
    run = DbtRun(
        args=[dbt_executable(settings), *args],
        returncode=returncode,
        seconds=time.perf_counter() - started,
        output="\n".join(lines.lines),
        timings=model_timings(results),
        startup_seconds=seconds_to_first_node(results, launched),
        results=results,
    )
    if check and not run.ok:
        tail = "\n".join(lines.lines[-40:])
        raise DbtError(
            f"dbt {' '.join(command)} failed with exit code {returncode}. Last output:\n{tail}\n"
            f"Full log: {target / 'dbt.log'}. "
            "Fix the failing model or test above, then re-run the same window: every window is idempotent."
        )
    return run
