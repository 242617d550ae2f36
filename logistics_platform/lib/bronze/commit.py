"""Committing written data files to a bronze table: replace the files of some arrival hours, in one commit.

Concurrent writers of other hours of the same table are handled by optimistic concurrency: on
``CommitFailedException`` (or ``ValidationException``) the table is reloaded and the same replace is planned
again on the fresh metadata with the already-written files (the tables turn pyiceberg's own blind retry off).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from pyiceberg.catalog import Catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import BooleanExpression, EqualTo, In
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, Transaction
from pyiceberg.types import TimestampType

from logistics_platform.lib.timekeys import epoch_micros

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 12

BeforeCommitHook = Callable[[str], None]
"""Called with the table identifier after its data files are written and the table metadata is loaded, right
before the first commit attempt (tests inject crashes and line up concurrent commits with it)."""

T = TypeVar("T")


def retry_on_conflict(what: str, action: Callable[[int], T]) -> tuple[T, int]:
    """Run ``action(attempt)`` until it commits; back off with jitter on concurrent-commit conflicts.

    Returns (what ``action`` returned, attempts). ``action`` must reload the table: each attempt plans anew.
    """
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        try:
            return action(attempt), attempt
        except (CommitFailedException, ValidationException) as e:
            if attempt == MAX_COMMIT_ATTEMPTS:
                raise CommitFailedException(
                    f"{what}: still conflicting after {attempt} attempts with concurrent commits ({e}); "
                    "re-run the partition"
                ) from e
            delay = min(2.0, 0.05 * 2**attempt) * (0.5 + random.random())
            log.info("%s: concurrent commit, retrying in %.2fs (attempt %d)", what, delay, attempt)
            time.sleep(delay)
    raise AssertionError("unreachable")


def _hours_filter(hour_column: str, hours: Sequence[datetime]) -> BooleanExpression:
    """The row filter selecting the rows of ``hours`` (values of ``hour_column``)."""
    if len(hours) == 1:
        return EqualTo(hour_column, hours[0].isoformat())
    return In(hour_column, [h.isoformat() for h in hours])


def _hour_files(table: Table, hour_column: str, hours: Sequence[datetime]) -> tuple[list[DataFile], bool]:
    """Live data files that may hold rows of ``hours``; and whether each holds nothing but one of those hours."""
    if table.current_snapshot() is None:
        return [], True
    field_id = table.schema().find_field(hour_column).field_id
    wanted = sorted(epoch_micros(h) for h in hours)
    files, whole = [], True
    for task in table.scan(row_filter=_hours_filter(hour_column, hours)).plan_files():
        f = task.file
        lo, hi = f.lower_bounds.get(field_id), f.upper_bounds.get(field_id)
        lo_v = from_bytes(TimestampType(), lo) if lo is not None else None
        hi_v = from_bytes(TimestampType(), hi) if hi is not None else None
        if lo_v is not None and lo_v == hi_v and lo_v in wanted and not task.delete_files:
            files.append(f)
        elif lo_v is None or hi_v is None or any(lo_v <= h <= hi_v for h in wanted):
            whole = False
            files.append(f)
    return files, whole


def _append_files(tx: Transaction, new_files: Sequence[DataFile], properties: dict[str, str]) -> None:
    """Add ``new_files`` to the transaction as an append (the existing manifests carried over by reference)."""
    with tx.update_snapshot(snapshot_properties=properties).fast_append() as fa:
        for f in new_files:
            fa.append_data_file(f)


def replace_hours(
    catalog: Catalog,
    identifier: str,
    hour_column: str,
    hours: Sequence[datetime],
    new_files: list[DataFile],
    properties: dict[str, str],
    before_commit: BeforeCommitHook | None = None,
) -> tuple[int | None, int]:
    """Replace the rows of ``hours`` by ``new_files`` in one commit; retried on concurrent commits.

    Returns (snapshot id, attempts). In the usual case every old file of these hours holds only one of them and
    the replace is metadata-only (one OVERWRITE snapshot). After compaction merged a day into larger files, the
    delete rewrites them copy-on-write (still one catalog commit). Hours outside ``hours`` are never touched.
    """

    def attempt(n: int) -> int | None:
        table = catalog.load_table(identifier)
        old, whole = _hour_files(table, hour_column, hours)
        if not old and not new_files:
            return _snapshot_id(table)
        if before_commit is not None and n == 1:
            before_commit(identifier)
        with table.transaction() as tx:
            if not old:
                # Hours never ingested (the hourly run's usual case): an append, which carries the existing
                # manifests over by reference, where an overwrite would read every one of them to find deletes.
                _append_files(tx, new_files, properties)
            elif whole:
                with tx.update_snapshot(snapshot_properties=properties).overwrite() as ow:
                    for f in old:
                        ow.delete_data_file(f)
                    for f in new_files:
                        ow.append_data_file(f)
            else:
                tx.delete(_hours_filter(hour_column, hours), snapshot_properties=properties)
                if new_files:
                    _append_files(tx, new_files, properties)
        return _snapshot_id(table)

    what = f"{hours[0]:%Y-%m-%d %H:00}" + (f" .. {hours[-1]:%Y-%m-%d %H:00}" if len(hours) > 1 else "")
    return retry_on_conflict(f"{identifier}: replace {what}", attempt)


def _snapshot_id(table: Table) -> int | None:
    snap = table.current_snapshot()
    return snap.snapshot_id if snap else None
