"""The parsed dbt manifest that a long-lived dbt process (the warm worker) keeps between invocations.

Why: even when nothing changed, every dbt invocation reads its partial-parse state back (~0.2 s of msgpack decoding
of the whole manifest, on the GIL) before it runs a node. dbt's programmatic API takes an already parsed manifest
(``dbtRunner(manifest=...)``), so the worker parses once and hands the same manifest to every later invocation that
would parse the same project the same way.

"The same way" is the cache key, built from everything parsing reads:

- the project's files: path, size and modification time of every file under the project directory except its
  target and log directories (dbt's own partial parsing compares these files' contents), and ``profiles.yml``;
- the flags that choose project, profiles, profile, target and vars;
- the environment, whole (dbt records the ``env_var()`` calls made while parsing, and the profile renders env vars),
  except the arrival-window variables: the window macros read them at execution only (``arrival_window.sql``).

Any other flag of a known kind only steers what an invocation runs and where it writes. An argument list with a flag
not listed here is never served from the cache: dbt parses as usual.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from logistics_platform.lib.transform.project import window_env

# Commands that run on a parsed project; `parse` itself refreshes the cache.
MANIFEST_COMMANDS = frozenset({"build", "run", "test", "seed", "compile"})
PARSE_COMMAND = "parse"
# Flags (with their values) that change what dbt parses.
PARSE_FLAGS = frozenset({"--project-dir", "--profiles-dir", "--profile", "--target", "-t", "--vars"})
# Flags that only choose what runs, how, or where dbt writes.
RUN_FLAGS = frozenset(
    {
        "--target-path",
        "--log-path",
        "--select",
        "-s",
        "--models",
        "-m",
        "--exclude",
        "--selector",
        "--resource-type",
        "--resource-types",
        "--exclude-resource-type",
        "--exclude-resource-types",
        "--full-refresh",
        "--threads",
        "--fail-fast",
        "-x",
        "--no-write-json",
        "--write-json",
        "--log-level",
        "--log-level-file",
    }
)
# Where a parse on a cache miss must write what the invocation itself would have (its log, partial-parse state).
_OUTPUT_FLAGS = frozenset({"--target-path", "--log-path", "--no-write-json", "--write-json"})
# Read by the dbt macros at execution only, so a new window never changes the parsed manifest.
EXECUTION_ONLY_ENV = frozenset(window_env({"min_arrival_hour": "", "max_arrival_hour": ""}))
_SKIPPED_DIRS = frozenset({"target", "logs", "__pycache__"})


def split_flags(args: Sequence[str]) -> list[tuple[str, list[str]]] | None:
    """``args`` after the command as (flag, values) pairs; None if a token is not under a flag or a flag is unknown."""
    pairs: list[tuple[str, list[str]]] = []
    for token in args[1:]:
        if token.startswith("-") and not _is_value(token):
            name = token.split("=", 1)[0]
            if name not in PARSE_FLAGS | RUN_FLAGS:
                return None
            pairs.append((name, [token.split("=", 1)[1]] if "=" in token else []))
        elif pairs:
            pairs[-1][1].append(token)
        else:
            return None
    return pairs


def _is_value(token: str) -> bool:
    # A negative number (e.g. a var's value) is not a flag.
    return token[1:2].isdigit()


def manifest_key(args: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The cache key of the manifest ``args`` would parse under ``env``; None if the invocation cannot use one."""
    if not args or args[0] not in MANIFEST_COMMANDS | {PARSE_COMMAND}:
        return None
    pairs = split_flags(args)
    if pairs is None:
        return None
    flags = {name: values for name, values in pairs if name in PARSE_FLAGS}
    project_dir = Path(_single(flags.get("--project-dir")) or ".").resolve()
    profiles_dir = Path(_single(flags.get("--profiles-dir")) or project_dir).resolve()
    key = {
        "flags": sorted(flags.items()),
        "env": sorted((k, v) for k, v in env.items() if k not in EXECUTION_ONLY_ENV),
        "project": project_files(project_dir),
        "profiles": _stat(profiles_dir / "profiles.yml"),
    }
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()


def parse_args(args: Sequence[str]) -> list[str]:
    """The ``dbt parse`` that reads the project as ``args`` would and writes where it would."""
    pairs = split_flags(args) or []
    command = [PARSE_COMMAND]
    for name, values in pairs:
        if name in PARSE_FLAGS or name in _OUTPUT_FLAGS:
            command += [name, *values]
    return command


def project_files(project_dir: Path) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime in ns) of every file dbt may read under ``project_dir``, sorted."""
    files = []
    for root, dirs, names in os.walk(project_dir):
        dirs[:] = [d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith(".")]
        for name in names:
            path = Path(root) / name
            stat = path.stat()
            files.append((str(path.relative_to(project_dir)), stat.st_size, stat.st_mtime_ns))
    return sorted(files)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _single(values: list[str] | None) -> str | None:
    return values[0] if values else None


class ManifestCache:
    """The last parsed manifest and its key (one entry: the worker serves one project and target)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: str | None = None
        self._manifest: Any = None
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Any:
        with self._lock:
            if key == self._key:
                self.hits += 1
                return self._manifest
            self.misses += 1
            return None

    def put(self, key: str, manifest: Any) -> None:
        with self._lock:
            self._key, self._manifest = key, manifest
