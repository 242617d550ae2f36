"""Running the dbt project: the arrival-hour window, the ``DbtProject`` of the settings, and dbt itself.

dbt always runs through dagster-dbt's ``DbtCliResource``: a dbt child process per invocation, which exits with the
invocation (nothing of ours outlives a run). The Dagster assets call it with their context (events, asset checks);
:func:`run_dbt` calls it without one for the CLI, the late-event fold, tests and benchmarks. The child sees the
settings through :func:`settings.dbt_environment` (profiles.yml and the dbt-duckdb plugin read them).

The manifest depends on the settings: the relations it names carry the DuckDB catalog name
(``settings.duckdb_database``) and the target, so the ``DbtProject`` of the settings has the target path
``dbt_project/target/<target>-<database>/``. Each invocation gets its own directory inside it, which dagster-dbt
names and seeds with the partial-parse state there (``DBT_TARGET_PATH``), so dbt's own partial parsing re-reads only
what changed. The manifest is parsed again (offline: ``dbt parse`` opens no database) when it is missing or the
project's files changed since (their fingerprint): dagster-dbt's ``prepare_if_dev()`` parses only under
``dagster dev``, and there in every process that loads the definitions, run workers included (a dbt start-up on the
live SLA path); a deployment parses at build time (``logistics-platform setup``).
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logistics_platform.lib.transform.spark import is_spark, spark_environment
from logistics_platform.settings import DBT_PROJECT_DIR, Settings, dbt_environment

if TYPE_CHECKING:  # imported where used: `setup` checks the manifest without loading dagster-dbt and dbt (seconds)
    from dagster_dbt import DbtCliResource, DbtProject

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
PARTIAL_PARSE_FILE = "partial_parse.msgpack"
FINGERPRINT_FILE = "project.sha256"
# Per-invocation directories kept under the project's target path (artifacts and dbt.log of the latest runs).
KEEP_RUNS = 48


def manifest_key(settings: Settings) -> str:
    """Directory name under ``dbt_project/target/`` of the manifest for ``settings``: what the manifest depends on."""
    return f"{settings.dbt_target}-{settings.duckdb_database}"


def project_target(settings: Settings) -> Path:
    """The target path of the settings' ``DbtProject``: manifest, partial-parse state, one directory per run."""
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
    """The manifest of this checkout for ``settings``, parsed first if missing or stale (dbt is loaded only then).

    ``dbt parse`` writes into a scratch directory (seeded by dagster-dbt with the partial-parse state) and its files
    are moved in, the fingerprint last: processes that load the definitions at once (a code server, run workers) may
    both parse, and a reader never pairs a new fingerprint with an old manifest.
    """
    target = project_target(settings)
    fingerprint = project_fingerprint(settings)
    recorded = target / FINGERPRINT_FILE
    if (target / "manifest.json").exists() and recorded.exists() and recorded.read_text() == fingerprint:
        return target / "manifest.json"
    scratch = target.parent / f".parse-{target.name}-{uuid.uuid4().hex[:8]}"
    try:
        run_dbt(settings, ["parse"], target_path=scratch)
        (scratch / FINGERPRINT_FILE).write_text(fingerprint)
        target.mkdir(parents=True, exist_ok=True)
        for name in ("manifest.json", PARTIAL_PARSE_FILE, FINGERPRINT_FILE):
            if (scratch / name).exists():
                (scratch / name).replace(target / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target / "manifest.json"


def dbt_project(settings: Settings) -> DbtProject:
    """The dbt project with its manifest for ``settings`` (parsed first if missing or stale)."""
    from dagster_dbt import DbtProject

    ensure_manifest(settings)
    return DbtProject(
        project_dir=DBT_PROJECT_DIR,
        profiles_dir=DBT_PROJECT_DIR,
        target=settings.dbt_target,
        target_path=project_target(settings).relative_to(DBT_PROJECT_DIR),
    )


def prune_run_targets(runs_dir: Path, keep: int = KEEP_RUNS) -> list[Path]:
    """Delete all but the ``keep`` newest per-invocation directories under ``runs_dir``; return the deleted."""
    if not runs_dir.is_dir():
        return []
    runs = sorted((p for p in runs_dir.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in runs[keep:]:
        shutil.rmtree(path, ignore_errors=True)
    return runs[keep:]


@contextlib.contextmanager
def dbt_invocation_environment(settings: Settings, window: dict[str, str] | None = None) -> Iterator[None]:
    """The environment of one ``DbtCliResource.cli`` call: settings, target, window, and where dagster-dbt puts runs.

    ``DBT_TARGET_PATH`` is where dagster-dbt creates the invocation's own directory and takes the partial-parse
    state from. The window goes as environment variables (see :func:`window_env`).
    """
    target = project_target(settings)
    prune_run_targets(target)
    extra = {**target_environment(settings), **window_env(window or {}), "DBT_TARGET_PATH": str(target)}
    with dbt_environment(settings, extra):
        yield


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


@dataclass
class DbtRun:
    """What one dbt invocation did."""

    args: list[str]
    returncode: int
    seconds: float
    output: str
    # One dict per node, in the shape of run_results.json's "results" (unique_id, status, timing, execution_time, ...).
    results: list[dict[str, Any]] = field(default_factory=list)
    # Seconds from launching dbt to its first node starting: interpreter, project, manifest and connection set-up.
    startup_seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def timings(self) -> dict[str, float]:
        """Seconds per node (model name -> execution time)."""
        return {r["unique_id"].split(".")[-1]: float(r.get("execution_time") or 0.0) for r in self.results}


def seconds_to_first_node(results: list[dict[str, Any]], launched: datetime) -> float | None:
    """Seconds from ``launched`` (UTC, naive) to the first node starting; None if no node ran."""
    starts = [datetime.fromisoformat(t["started_at"].rstrip("Z")) for r in results for t in r.get("timing", [])]
    first = min((s.replace(tzinfo=None) for s in starts), default=None)
    return (first - launched).total_seconds() if first and first >= launched else None


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
    """Run one dbt command through ``DbtCliResource`` (no Dagster context); raise :class:`DbtError` if it fails.

    ``dbt_vars`` go on the command line; ``window`` (from :func:`window_vars`) goes through the environment, as the
    Dagster assets pass it. Without ``target_path`` the invocation gets its own directory from dagster-dbt.
    ``echo`` gets each line of dbt's output (else it is only kept in the result).
    """
    args = [*join_selection_values(command), *(["--vars", json.dumps(dbt_vars)] if dbt_vars else [])]
    launched = datetime.now(UTC).replace(tzinfo=None)
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
    # A run with --vars leaves a parse state for those vars: not one for the next runs to start from.
    if target_path is None and not dbt_vars:
        keep_partial_parse(settings, invocation.target_path)
    results_file = invocation.target_path / "run_results.json"
    results = json.loads(results_file.read_text()).get("results", []) if results_file.exists() else []
    run = DbtRun(
        args=[dbt_executable(settings), *args],
        returncode=returncode,
        seconds=time.perf_counter() - started,
        output=output.getvalue(),
        results=list(results),
        startup_seconds=seconds_to_first_node(results, launched),
    )
    if check and not run.ok:
        tail = "\n".join(output.getvalue().splitlines()[-40:])
        raise DbtError(
            f"dbt {' '.join(command)} failed with exit code {returncode}. Last output:\n{tail}\n"
            f"Full log: {invocation.target_path / 'dbt.log'}. "
            "Fix the failing model or test above, then re-run the same window: every window is idempotent."
        )
    return run
