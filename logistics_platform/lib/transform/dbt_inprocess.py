"""Running dbt inside the calling process (dbt's programmatic ``dbtRunner``).

Why: a Dagster run worker has already imported dbt-core to load the definitions. Spawning the dbt CLI for every
arrival hour paid a second interpreter start, dbt's imports, project and profile loading and the adapter set-up all
over again (~4 s of the ~7 s an hour took); in-process, the hour pays dbt's own set-up (~1.7 s on a process's
first invocation, ~0.5 s after) and what its nodes do. The warm dbt worker (:mod:`dbt_worker`) runs the same
:func:`run_in_process` in a process that outlives the runs, so that only its first invocation pays the ~1.7 s.

dbt keeps process-wide state (flags, adapter registry, invocation context, event logger), so invocations in one
process run one at a time (:data:`_INVOCATION_LOCK`). The dbt-duckdb plugin builds its settings from the environment,
so the invocation runs inside :func:`applied_environment`. The child-process runner (:func:`transform.run_dbt`) stays
for the CLI passthrough and for tooling that wants dbt isolated.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from logistics_platform.lib.transform.dbt_manifest_cache import (
    MANIFEST_COMMANDS,
    PARSE_COMMAND,
    ManifestCache,
    manifest_key,
    parse_args,
)
from logistics_platform.lib.transform.project import (
    DbtError,
    DbtRun,
    dbt_args,
    model_timings,
    seconds_to_first_node,
    window_env,
)
from logistics_platform.settings import Settings, subprocess_env

PARTIAL_PARSE_FILE = "partial_parse.msgpack"
# dbt's structured events that carry one node's final status (what dagster-dbt turns into Dagster events).
RESULT_EVENTS = frozenset({"LogModelResult", "LogSeedResult", "LogSnapshotResult", "LogTestResult"})

# The in-memory DuckDB instance that profiles.yml's local target opens (its `path`), and this process's connection
# holding it open between invocations, if it keeps one (hold_duckdb_instance).
DBT_DUCKDB_INSTANCE = ":memory:logistics"
_held_instance: Any = None

_INVOCATION_LOCK = threading.Lock()
_log = logging.getLogger(__name__)


@contextmanager
def applied_environment(wanted: Mapping[str, str]) -> Iterator[None]:
    """Make ``wanted`` this process's whole environment while dbt runs, then restore the previous one.

    dbt renders ``env_var()`` from the process environment, and the dbt-duckdb plugin builds its Settings from it.
    Whole, not merged: a worker serving many runs must not leak one run's window into the next.
    """
    saved = dict(os.environ)
    _replace_environment(wanted)
    try:
        yield
    finally:
        _replace_environment(saved)


def _replace_environment(wanted: Mapping[str, str]) -> None:
    # Key by key, never cleared: other threads of the step (Dagster's) may read the environment meanwhile.
    for key in set(os.environ) - set(wanted):
        del os.environ[key]
    os.environ.update(wanted)


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

    Each Dagster dbt step gets its own target directory (dbt.log, partial-parse state); without pruning they would
    pile up by one per hourly run.
    """
    if not runs_dir.is_dir():
        return []
    runs = sorted((p for p in runs_dir.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    stale = runs[keep:]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


def invoke_dbt(
    settings: Settings,
    command: Sequence[str],
    *,
    target_path: Path,
    window: dict[str, str] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    check: bool = True,
) -> DbtRun:
    """Run one dbt command in the warm dbt worker or in this process; ``on_result`` gets each node's result event.

    The worker (:mod:`dbt_worker`, ``DBT_WORKER=auto``) runs it when it can be reached or started; otherwise, or
    with ``DBT_WORKER=off``, dbt runs in this process. ``window`` (from :func:`transform.window_vars`) goes through
    the environment, as for the child-process runner. Raises :class:`transform.DbtError` if dbt fails and ``check``.
    """
    # No JSON artifacts: the results come back as objects, and writing manifest.json (twice) and run_results.json
    # costs ~0.6 s per invocation. The partial-parse state and the log file are still written.
    args = [
        *dbt_args(settings, command, None, target_path)[1:],
        "--log-path",
        str(target_path / "logs"),
        "--no-write-json",
    ]
    env = {**subprocess_env(settings), **window_env(window or {})}
    settings.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    run = None
    if settings.dbt_worker == "auto":
        from logistics_platform.lib.transform.dbt_worker import WorkerFailed, WorkerUnavailable, invoke_via_worker

        try:
            run = invoke_via_worker(
                settings.duckdb_path, args, env, on_result, idle_seconds=settings.dbt_worker_idle_minutes * 60
            )
        except WorkerUnavailable as exc:
            _log.warning("dbt runs in this process: %s", exc)
        except WorkerFailed as exc:
            raise DbtError(str(exc)) from exc
    if run is None:
        run = run_in_process(args, env, on_result)
    if check and not run.ok:
        raise DbtError(
            f"dbt {' '.join(command)} failed.\n{run.output}\nFull log: {target_path / 'logs' / 'dbt.log'}. "
            "Fix the failing model or test above, then re-run the same window: every window is idempotent."
        )
    return run


def run_in_process(
    args: Sequence[str],
    env: Mapping[str, str],
    on_result: Callable[[dict[str, Any]], None] | None = None,
    manifests: ManifestCache | None = None,
) -> DbtRun:
    """Run dbt with the full argument list ``args`` in this process, under ``env``.

    With ``manifests`` (a long-lived process), the invocation runs on the manifest parsed for the same project state
    before, or parses once and keeps the result (see :mod:`dbt_manifest_cache`).
    """
    # The clock includes importing dbt's CLI module (imported here: only processes that run dbt need it).
    launched = datetime.now(UTC).replace(tzinfo=None)
    started = time.perf_counter()
    from dbt.cli.main import dbtRunner
    from dbt_common.events.base_types import EventMsg
    from dbt_common.events.functions import msg_to_dict

    def forward(msg: EventMsg) -> None:
        if on_result is not None and msg.info.name in RESULT_EVENTS:
            on_result(msg_to_dict(msg))

    with _INVOCATION_LOCK, applied_environment(env):
        try:
            key = manifest_key(args, env) if manifests is not None else None
            manifest = _parsed_manifest(args, key, manifests)
            outcome = dbtRunner(manifest=manifest, callbacks=[forward]).invoke(list(args))
            if manifests is not None and key is not None and args[0] == PARSE_COMMAND and outcome.success:
                manifests.put(key, outcome.result)
        finally:
            release_duckdb()
        seconds = time.perf_counter() - started
    results = result_dicts(outcome.result)
    returncode = 0 if outcome.success else (2 if outcome.exception is not None else 1)
    return DbtRun(
        args=list(args),
        returncode=returncode,
        seconds=seconds,
        output=failure_summary(results, outcome.exception),
        timings=model_timings(results),
        startup_seconds=seconds_to_first_node(results, launched),
        results=results,
    )


def _parsed_manifest(args: Sequence[str], key: str | None, manifests: ManifestCache | None) -> Any:
    """The manifest for ``key`` from ``manifests``, parsing it on a miss; None to let dbt parse as it always does."""
    if manifests is None or key is None or args[0] not in MANIFEST_COMMANDS:
        return None
    manifest = manifests.get(key)
    if manifest is None:
        from dbt.cli.main import dbtRunner

        parsed = dbtRunner().invoke(parse_args(args))
        if not parsed.success:
            return None  # the invocation parses again and reports what is wrong
        manifest = parsed.result
        manifests.put(key, manifest)
    return manifest


def warm_up() -> None:
    """Import what every invocation needs (dbt's CLI, the DuckDB adapter), so that a worker's first call is warm."""
    import dbt.adapters.duckdb
    import dbt.cli.main
    import dbt.task.build  # noqa: F401


def result_dicts(result: Any) -> list[dict[str, Any]]:
    """dbt's node results (of build, run, test, seed ...) as run_results.json-shaped dicts; none for other commands."""
    dicts = []
    for r in getattr(result, "results", None) or []:
        node = getattr(r, "node", None)
        dicts.append(
            {
                "unique_id": getattr(node, "unique_id", "") if node is not None else "",
                "status": str(getattr(r.status, "value", r.status)),
                "execution_time": float(r.execution_time or 0.0),
                "message": r.message,
                "failures": r.failures,
                "timing": [
                    {"name": t.name, "started_at": _utc_iso(t.started_at), "completed_at": _utc_iso(t.completed_at)}
                    for t in r.timing
                ],
            }
        )
    return dicts


def _utc_iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat() + "Z"


def release_duckdb() -> None:
    """Close the DuckDB database dbt-duckdb keeps open in this process after an invocation.

    dbt-duckdb holds its environment (and the DuckDB instance on the file) at class level across invocations. Left
    open, any other connection to the file in this process with another configuration (the DuckDBResource of the
    publish step, in-process executors) fails with "Can't open a connection to same database file with a different
    configuration", and no other process can open the file for writing.
    """
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    with DuckDBConnectionManager._LOCK:
        env, DuckDBConnectionManager._ENV = DuckDBConnectionManager._ENV, None
    if env is not None:
        env.close()
    if _held_instance is not None:
        # The instance outlives the invocation; the database files dbt attached to it must not.
        attached = _held_instance.execute(
            "select database_name from duckdb_databases() where not internal and database_name <> 'memory'"
        ).fetchall()
        for (name,) in attached:
            _held_instance.execute(f'detach database "{name}"')


def hold_duckdb_instance() -> None:
    """Keep the local profile's in-memory DuckDB instance open in this process, the Iceberg extensions loaded.

    For a long-lived process (the warm dbt worker). profiles.yml's local target opens the named in-memory instance
    :data:`DBT_DUCKDB_INSTANCE` and attaches the analytics file to it. DuckDB verifies an extension's signature each
    time it is loaded into a new instance (~0.15-0.2 s for the Iceberg and Avro extensions); while this connection
    holds the instance open, every invocation's connection joins it and finds them loaded. :func:`release_duckdb`
    still detaches the file after each invocation.
    """
    global _held_instance
    if _held_instance is None:
        import duckdb

        from logistics_platform.lib.connections import load_extensions

        _held_instance = load_extensions(duckdb.connect(DBT_DUCKDB_INSTANCE))


def failure_summary(results: list[dict[str, Any]], exception: BaseException | None) -> str:
    """One line per node that failed or errored (with dbt's message), plus an invocation-level error."""
    lines = [
        f"{r.get('unique_id')}: {r.get('status')}: {(r.get('message') or '').strip()}"
        for r in results
        if r.get("status") in ("error", "fail", "runtime error")
    ]
    if exception is not None:
        lines.append(f"dbt raised {type(exception).__name__}: {exception}")
    return "\n".join(lines)
