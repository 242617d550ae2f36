"""A long-lived dbt process that the hourly dbt steps hand their invocations to, like a build daemon.

Why: every Dagster run is a new process, and dbt's one-time set-up in a process (importing its CLI, registering
the adapter, first-use initialisation) costs ~1.1-1.3 s of the ~4 s an hourly invocation takes. A worker that
outlives the runs pays it once. It also keeps what does not change from one hour to the next: the parsed manifest
while the project, flags and environment that parsing reads are unchanged (:mod:`dbt_manifest_cache`), and the
in-memory DuckDB instance with the Iceberg extensions loaded (:func:`dbt_inprocess.hold_duckdb_instance`). The rest
stays per invocation: the step's environment (settings, window) is applied for the call only, and the analytics
DuckDB file is detached after each call, so other processes (the publish step, the checks) can open it in between.

How: a Unix socket per DuckDB file (one writer per file, as the Dagster pool ``duckdb`` enforces). The first
client spawns the worker detached from its run; it serves one invocation at a time, streams each node's result
event back as it finishes, and exits after ``idle_seconds`` without work, when its code changed (the client and
worker fingerprints differ), or when its state directory is deleted. If the client goes away mid-invocation (the
run was terminated), the worker exits at once, as an in-process dbt would die with its run; DuckDB rolls back the
open transaction. Anything that fails before the worker accepts the call makes the caller run dbt in-process:
the worker saves time, it is never needed for correctness.

Protocol: one JSON object per line. Client: ``{"protocol", "fingerprint", "args", "env", "cwd"}``. Worker: ``{"type":
"accepted"}`` or ``{"type": "stale"}``, then ``{"type": "event", "event": ...}`` per node result and finally
``{"type": "done", "run": ...}`` or ``{"type": "error", "message": ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import gc
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from logistics_platform.lib.transform.dbt_manifest_cache import ManifestCache
from logistics_platform.lib.transform.project import DbtRun

PROTOCOL = 1
PACKAGE_DIR = Path(__file__).resolve().parents[1]
# How long a client waits for a worker it spawned to listen (imports dbt first: ~1-3 s on a busy machine).
SPAWN_TIMEOUT_SECONDS = 60.0
# The worker's log (dbt's console output of every invocation) starts afresh at a spawn once it is this large.
LOG_ROTATE_BYTES = 20 * 1024 * 1024
# How often an idle worker checks that it should still be running.
_TICK_SECONDS = 30.0

Runner = Callable[[Sequence[str], Mapping[str, str], Callable[[dict[str, Any]], None]], DbtRun]


class WorkerUnavailable(RuntimeError):
    """No worker took the invocation; the caller runs dbt itself."""


class WorkerFailed(RuntimeError):
    """The worker accepted the invocation and then died or broke the protocol."""


def socket_path(duckdb_path: Path) -> Path:
    """The worker's address for one DuckDB file (under the temp dir: socket paths are limited to ~100 bytes)."""
    key = hashlib.sha256(str(Path(duckdb_path).resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"logistics-dbt-{os.getuid()}-{key}.sock"


def fingerprint() -> str:
    """Identity of the code a worker runs: interpreter, dbt/DuckDB versions, and every module of this package.

    A client whose fingerprint differs (a deploy, an edited module) gets the worker to exit and starts a new one.
    """
    digest = hashlib.sha256(sys.executable.encode())
    for dist in ("dbt-core", "dbt-duckdb", "duckdb"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            digest.update(f"{dist}={metadata.version(dist)}".encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(PACKAGE_DIR)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


# -- client -----------------------------------------------------------------------------------------------------


def invoke_via_worker(
    duckdb_path: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    on_result: Callable[[dict[str, Any]], None] | None = None,
    *,
    idle_seconds: float,
) -> DbtRun:
    """Run one dbt invocation in the worker for ``duckdb_path``, starting it if none listens.

    Raises :class:`WorkerUnavailable` if no worker accepted the call (run dbt in-process instead) and
    :class:`WorkerFailed` if it accepted and then failed (the window must be re-run: every window is idempotent).
    """
    path = socket_path(duckdb_path)
    mine = fingerprint()
    for attempt in range(2):
        conn = _connect(path)
        if conn is None:
            _spawn(path, duckdb_path, env, idle_seconds)
            conn = _wait_for(path, SPAWN_TIMEOUT_SECONDS)
        if conn is None:
            raise WorkerUnavailable(f"no dbt worker listens on {path}")
        with conn, conn.makefile("rwb") as stream:
            try:
                _send(
                    stream,
                    {
                        "protocol": PROTOCOL,
                        "fingerprint": mine,
                        "args": list(args),
                        "env": dict(env),
                        "cwd": os.getcwd(),
                    },
                )
                reply = _receive(stream)
            except OSError as exc:
                raise WorkerUnavailable(f"the dbt worker on {path} did not answer: {exc}") from exc
            if reply.get("type") == "stale" and attempt == 0:
                # It runs other code and is exiting; the second attempt spawns one with ours.
                _wait_gone(path)
                continue
            if reply.get("type") != "accepted":
                raise WorkerUnavailable(f"the dbt worker on {path} refused the call: {reply}")
            return _follow(stream, on_result, path)
    raise WorkerUnavailable(f"the dbt worker on {path} kept running other code")


def _follow(stream: Any, on_result: Callable[[dict[str, Any]], None] | None, path: Path) -> DbtRun:
    while True:
        try:
            message = _receive(stream)
        except (OSError, ValueError) as exc:
            raise WorkerFailed(
                f"the dbt worker on {path} died during the invocation ({exc}); see its log beside the DuckDB file, "
                "then re-run the window (re-running is idempotent)"
            ) from exc
        kind = message.get("type")
        if kind == "event":
            if on_result is not None:
                on_result(message["event"])
        elif kind == "done":
            return DbtRun(**message["run"])
        else:
            raise WorkerFailed(f"the dbt worker on {path} failed: {message.get('message', message)}")


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn


def _wait_for(path: Path, timeout: float) -> socket.socket | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conn = _connect(path)
        if conn is not None:
            return conn
        time.sleep(0.05)
    return None


def _wait_gone(path: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and path.exists():
        time.sleep(0.05)


def log_path(duckdb_path: Path) -> Path:
    """Where the worker writes its output: beside the DuckDB file it builds."""
    return Path(duckdb_path).parent / "dbt-worker.log"


def _spawn(path: Path, duckdb_path: Path, env: Mapping[str, str], idle_seconds: float) -> None:
    log = log_path(duckdb_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    if log.exists() and log.stat().st_size > LOG_ROTATE_BYTES:
        log.replace(log.with_suffix(".log.1"))  # one older generation is kept
    with open(log, "ab") as out:
        # Its own session: terminating the run that spawned it must not take down the worker serving other runs.
        # No inherited stdout/stderr: a caller waiting for its pipes to close (CI, make) must not wait for it.
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "logistics_platform.lib.transform.dbt_worker",
                "--socket",
                str(path),
                "--state-dir",
                str(Path(duckdb_path).parent),
                "--idle-seconds",
                str(idle_seconds),
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )
    # Reaped when it exits, should this process still be alive then (no zombie left behind).
    threading.Thread(target=worker.wait, name="dbt-worker-reaper", daemon=True).start()


def _send(stream: Any, message: Mapping[str, Any]) -> None:
    stream.write(json.dumps(message, default=str).encode() + b"\n")
    stream.flush()


def _receive(stream: Any) -> dict[str, Any]:
    line = stream.readline()
    if not line:
        raise ConnectionError("connection closed")
    return json.loads(line)


def _ask(path: Path, request: Mapping[str, Any]) -> dict[str, Any] | None:
    """Send one operator request; the worker's reply (empty if it gave none), or None if no worker listens."""
    conn = _connect(path)
    if conn is None:
        return None
    with conn, conn.makefile("rwb") as stream:
        _send(stream, {"protocol": PROTOCOL, **request})
        try:
            return _receive(stream)
        except (OSError, ValueError):
            return {}


def worker_status(duckdb_path: Path) -> dict[str, Any] | None:
    """What the worker for ``duckdb_path`` reports about itself (pid, start, invocations, code), or None."""
    reply = _ask(socket_path(duckdb_path), {"status": True})
    if not reply:
        return None
    return {**reply, "current_code": reply.get("fingerprint") == fingerprint()}


def stop_worker(duckdb_path: Path, timeout: float = 10.0) -> bool:
    """Ask the worker for ``duckdb_path`` to exit; the request waits for the invocation it runs, if any."""
    path = socket_path(duckdb_path)
    if _ask(path, {"stop": True}) is None:
        return False
    _wait_gone(path, timeout)
    return True


# -- worker -----------------------------------------------------------------------------------------------------


def serve(
    path: Path, state_dir: Path, idle_seconds: float, runner: Runner, manifests: ManifestCache | None = None
) -> int:
    """Serve invocations on ``path`` one at a time until idle, stale, stopped or orphaned; return the exit code."""
    mine = fingerprint()
    lock = open(f"{path}.lock", "w")  # noqa: SIM115 - held for the worker's lifetime
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another worker serves this file (two clients spawned one at the same moment)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)  # the socket is created for this user only, with no window in between
    try:
        listener.bind(str(path))
    finally:
        os.umask(previous)
    listener.listen(8)
    listener.settimeout(_TICK_SECONDS)
    _say(f"serving {path} (pid {os.getpid()}, exits after {idle_seconds:.0f}s idle)")
    last_work = time.monotonic()
    state = {"pid": os.getpid(), "since": time.strftime("%Y-%m-%d %H:%M:%S"), "invocations": 0, "fingerprint": mine}
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                if time.monotonic() - last_work > idle_seconds:
                    _say("idle: exiting")
                    return 0
                if not state_dir.exists():
                    _say(f"{state_dir} is gone: exiting")
                    return 0
                continue
            conn.settimeout(None)
            with conn, conn.makefile("rwb") as stream:
                reused = manifests.hits if manifests is not None else 0
                outcome = _handle(conn, stream, state, runner)
                if manifests is not None:
                    state["manifest_reused"] = manifests.hits
                    state["manifest_parsed"] = manifests.misses
                    if outcome == "served":
                        _say(f"  manifest {'reused' if manifests.hits > reused else 'parsed'}")
            if outcome == "served":
                last_work = time.monotonic()
                _settle_heap()
            elif outcome != "answered":
                _say(f"{outcome}: exiting")
                return 0
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _handle(conn: socket.socket, stream: Any, state: dict[str, Any], runner: Runner) -> str:
    try:
        request = _receive(stream)
    except (OSError, ValueError):
        return "answered"  # a probe or a client that went away: nothing to do
    if request.get("stop"):
        _send(stream, {"type": "stopping"})
        return "stopped"
    if request.get("status"):
        _send(stream, {"type": "status", **state})
        return "answered"  # a status request does not keep an idle worker alive
    if request.get("protocol") != PROTOCOL or request.get("fingerprint") != state["fingerprint"]:
        _send(stream, {"type": "stale"})
        return "stale (a client runs other code)"
    _send(stream, {"type": "accepted"})
    # If the run that called goes away, stop: its dbt work must not outlive it, as it would not in-process.
    finished = threading.Event()
    watcher = threading.Thread(target=_exit_when_closed, args=(conn, finished), daemon=True)
    watcher.start()
    args, env = request["args"], request["env"]
    _say(f"dbt {' '.join(args[:1])} ...")
    home = os.getcwd()
    sending = threading.Lock()

    def forward(event: dict[str, Any]) -> None:
        with sending:  # dbt reports results from its node threads
            _send(stream, {"type": "event", "event": event})

    try:
        # In the caller's working directory, as dbt in its process would be (relative paths in its environment).
        os.chdir(request.get("cwd") or home)
        run = runner(args, env, forward)
        reply = {"type": "done", "run": asdict(run)}
    except Exception as exc:  # reported to the caller, which fails its step with it
        run, reply = None, {"type": "error", "message": f"{type(exc).__name__}: {exc}"}
    finally:
        os.chdir(home)
    finished.set()
    _send(stream, reply)
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)  # wakes the watcher
    watcher.join()
    state["invocations"] += 1
    if run is not None:
        _say(f"  done in {run.seconds:.2f}s (returncode {run.returncode})")
    return "served"


def _settle_heap() -> None:
    """Collect garbage between invocations, then exempt what survives from later collections.

    What survives an invocation lives on (dbt's modules, the parsed manifest: ~160k objects). Without this, a full
    collection during an invocation walks them all (~0.13 s, roughly every other hourly run); here it runs while the
    worker waits for the next call. Unfrozen first, so that anything frozen last time and dropped since is freed.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _exit_when_closed(conn: socket.socket, finished: threading.Event) -> None:
    with contextlib.suppress(OSError):
        while conn.recv(1):
            pass
    if not finished.is_set():
        _say("the caller went away mid-invocation: exiting")
        os._exit(3)


def _say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} dbt-worker: {text}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Serve dbt invocations for one DuckDB file (spawned by the dbt steps).")
    p.add_argument("--socket", type=Path, required=True)
    p.add_argument("--state-dir", type=Path, required=True)
    p.add_argument("--idle-seconds", type=float, required=True)
    args = p.parse_args(argv)
    from logistics_platform.lib.transform.dbt_inprocess import hold_duckdb_instance, run_in_process, warm_up

    warm_up()
    hold_duckdb_instance()
    manifests = ManifestCache()
    runner = functools.partial(run_in_process, manifests=manifests)
    return serve(args.socket, args.state_dir, args.idle_seconds, runner, manifests)


if __name__ == "__main__":
    raise SystemExit(main())
