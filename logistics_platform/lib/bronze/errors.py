"""Which failures of an ingest a retry can fix (the catalog or storage unavailable for a moment, a commit conflict,
a held lock; anything else fails the same way every time and is reported at once), and one line saying what failed.
"""

from __future__ import annotations

import sqlite3

import duckdb
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException, ServiceUnavailableError
from sqlalchemy import exc as sa_exc

from logistics_platform.lib.bronze.landing import is_transient_os_error

_TRANSIENT_TYPES: tuple[type[BaseException], ...] = (
    CommitFailedException,  # concurrent writers of the same table: re-planned on fresh metadata next time
    CommitStateUnknownException,
    ServiceUnavailableError,
    sa_exc.OperationalError,  # catalog database unreachable, restarting, or locked (SQLite "database is locked")
    sa_exc.DisconnectionError,
    sa_exc.TimeoutError,  # connection pool exhausted
    sqlite3.OperationalError,
)
_LOCK_WORDS = ("lock", "conflict")
# Operational errors of the catalog database that come from its content, not its availability.
_NOT_TRANSIENT_WORDS = (
    "no such table",
    "no such column",
    "syntax error",
    "does not exist",
    "permission denied",
    "authentication failed",
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return seen


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the same step can succeed (see the module docstring); looks through wrapped causes."""
    for e in _chain(exc):
        if isinstance(e, _TRANSIENT_TYPES):
            return not any(w in str(e).lower() for w in _NOT_TRANSIENT_WORDS)
        if isinstance(e, OSError) and is_transient_os_error(e):
            return True
        if isinstance(e, duckdb.IOException | duckdb.TransactionException) and any(
            w in str(e).lower() for w in _LOCK_WORDS
        ):
            return True
    return False


def one_line(exc: BaseException, limit: int = 500) -> str:
    """``Type: message`` on one line, shortened to ``limit`` characters."""
    text = " ".join(str(exc).split()) or repr(exc)
    line = f"{type(exc).__name__}: {text}"
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe_failure(exc: BaseException, what: str) -> str:
    """The one line an alert shows for a failure that is not retried: the cause and what to do."""
    return (
        f"{what} failed with an error that a retry cannot fix, so it was not retried: {one_line(exc)}. "
        "Fix the cause (input, schema or setting), then re-run the partition"
    )
