"""One line for every error a user can cause: what was wrong and what to do (``--debug`` shows the traceback)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

import duckdb

from logistics_platform.lib.connections import MisconfiguredError, catalog_misconfiguration, redacted
from logistics_platform.settings import SettingsError, load_settings

USAGE = 2  # a bad argument or setting
FAILED = 1  # the command could not do its work (unreachable catalog, locked file, ...)

_LOCK_RE = re.compile(r'lock on file "(?P<path>[^"]+)".*?\(PID (?P<pid>\d+)\)', re.S)


class CommandError(Exception):
    """A command cannot do its work; the message is the whole explanation, ``code`` the exit code."""

    def __init__(self, message: str, code: int = FAILED) -> None:
        super().__init__(message)
        self.code = code


def require_landing_dir(path: Path) -> None:
    """Fail with one line when the landing zone is missing or unreadable."""
    if not path.exists():
        raise CommandError(
            f"landing zone {path} does not exist: set LANDING_DIR (or run `logistics-platform generate`)"
        )
    if not path.is_dir():
        raise CommandError(f"landing zone {path} is not a directory: set LANDING_DIR to the landing root")
    if not os.access(path, os.R_OK | os.X_OK):
        raise CommandError(f"landing zone {path} cannot be read by this user: fix its permissions or LANDING_DIR")


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (the usage itself is in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message}; see `{self.prog} --help`\n")


def print_table(rows: list[list[str]]) -> None:
    """``rows`` (the first one the header) as left-aligned columns, a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in [rows[0], ["-" * w for w in widths], *rows[1:]]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def first_line(text: str, limit: int = 400) -> str:
    line = next((part.strip() for part in str(text).splitlines() if part.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _process(pid: int) -> str:
    """What runs as ``pid`` (its command line), for naming the holder of a lock."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"PID {pid}"
    command = " ".join(raw.decode(errors="replace").replace("\0", " ").split())  # one line, whatever the args hold
    return f"PID {pid} ({command[:120]})" if command else f"PID {pid}"


def _catalog(exc: BaseException) -> tuple[str, Exception | None]:
    """The catalog URI (redacted) and what ``exc`` says is wrong with it; the variable if the settings failed."""
    try:
        settings = load_settings()
    except ValueError:
        return "ICEBERG_CATALOG_URI", None
    return redacted(settings.catalog_uri), catalog_misconfiguration(settings, exc)


def explain(exc: BaseException) -> tuple[str, int]:
    """(one-line message, exit code) for an exception that ended a command."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, CommandError):
        return str(exc), exc.code
    if isinstance(exc, SettingsError):
        return f"{exc}", USAGE
    if isinstance(exc, sa_exc.ArgumentError):
        return f"ICEBERG_CATALOG_URI={_catalog(exc)[0]} is not a usable database URI ({first_line(str(exc))})", USAGE
    if isinstance(exc, MisconfiguredError):
        return str(exc), FAILED
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.DisconnectionError):
        uri, problem = _catalog(exc)
        if problem is not None:
            return str(problem), FAILED
        cause = first_line(str(getattr(exc, "orig", None) or exc))
        fix = "check that the database is running and ICEBERG_CATALOG_URI points to it"
        return f"cannot reach the Iceberg catalog at {uri}: {cause}; {fix}", FAILED
    if isinstance(exc, duckdb.IOException):
        m = _LOCK_RE.search(str(exc))
        if m:
            fix = "stop it (or wait for it to finish) and retry, or point DUCKDB_PATH at another file"
            return f"the DuckDB file {m['path']} is locked by another process, {_process(int(m['pid']))}: {fix}", FAILED
        hint = "; build it with `logistics-platform run` or set DUCKDB_PATH" if "does not exist" in str(exc) else ""
        return f"DuckDB cannot open a file: {first_line(str(exc))}{hint}", FAILED
    if isinstance(exc, duckdb.Error):
        return f"DuckDB: {first_line(str(exc))}", FAILED
    if isinstance(exc, NoSuchTableError | NoSuchNamespaceError):
        return f"{first_line(str(exc))}: no such Iceberg table yet; run `logistics-platform run` first", FAILED
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"cannot use {exc.filename}: {exc.strerror or exc}; check the path and its permissions", FAILED
    if isinstance(exc, ValueError):
        return first_line(str(exc)) or type(exc).__name__, USAGE
    return f"{type(exc).__name__}: {first_line(str(exc))}", FAILED


def report(command: str, exc: BaseException) -> int:
    """Print the one line for ``exc`` to stderr and return the exit code."""
    message, code = explain(exc)
    debug = f"`logistics-platform --debug {command} ...` shows the traceback"
    print(f"logistics-platform {command}: error: {message} ({debug})", file=sys.stderr)
    return code
