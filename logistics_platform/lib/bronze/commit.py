"""Committing written data files to a bronze table: replace some arrival hours, append to others, in one commit,
retried on concurrent commits (docs/internals/ingest.md, "Commits")."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from pyiceberg.catalog import Catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import In
from pyiceberg.manifest import DataFile, DataFileContent, ManifestContent
from pyiceberg.table import ManifestGroupPlanner, Table, Transaction
from pyiceberg.types import TimestampType

from logistics_platform.lib.iceberg_internals import transaction
from logistics_platform.lib.maintenance.expiry import delete_expired_metadata, stage_early_expiry
from logistics_platform.lib.maintenance.manifests import rewrite_manifests
from logistics_platform.lib.timekeys import epoch_micros

log = logging.getLogger(__name__)

MAX_COMMIT_ATTEMPTS = 12
DEAD_MANIFESTS_MAX = 8  # manifests holding no live file (pyiceberg's overwrite keeps them) before a consolidation

# Called with the table identifier right before the first commit attempt (tests inject crashes with it).
BeforeCommitHook = Callable[[str], None]

T = TypeVar("T")


def retry_on_conflict(what: str, action: Callable[[int], T]) -> tuple[T, int]:
    """(``action(attempt)``, attempts): retried with jittered back-off on conflicts; ``action`` reloads the table."""
    for attempt in range(1, MAX_COMMIT_ATTEMPTS + 1):
        try:
            return action(attempt), attempt
        except HourMovedError:
            raise
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


@dataclass
class HourFiles:
    """The live data files of one arrival hour in a table, as the manifests describe them (no data read)."""

    files: list[DataFile] = field(default_factory=list)  # files holding this hour and nothing else
    # files that may hold it among others (compacted), or with delete files: their rows of the hour are unknown
    mixed: list[DataFile] = field(default_factory=list)

    @property
    def records(self) -> int:
        """Rows of the hour in its own files (exact only when ``mixed`` is empty)."""
        return sum(f.record_count for f in self.files)

    @property
    def paths(self) -> frozenset[str]:
        """Every live file that may hold rows of the hour."""
        return frozenset(f.file_path for f in [*self.files, *self.mixed])


def hour_files(table: Table, hour_column: str, hours: Sequence[datetime]) -> dict[datetime, HourFiles]:
    """Hour -> its live data files, from the manifests over ``hours`` (partition and bounds pruning, no data read)."""
    out = {h: HourFiles() for h in hours}
    snapshot = table.current_snapshot()
    if snapshot is None or not hours:
        return out
    field_id = table.schema().find_field(hour_column).field_id
    by_micros = {epoch_micros(h): h for h in hours}
    # The manifest entries the partition and column-bounds filters keep, without the scan tasks plan_files() builds:
    # it evaluates a residual per matched file, a cost that grows with the files an open hour collects.
    planner = ManifestGroupPlanner(table.metadata, table.io, row_filter=In(hour_column, [h.isoformat() for h in hours]))
    entries = [e for batch in planner.plan_manifest_entries(snapshot.manifests(table.io)) for e in batch]
    data = [e.data_file for e in entries if e.data_file.content == DataFileContent.DATA]
    deletes = len(data) < len(entries)  # delete files (the platform writes none): no file's rows are known
    for f in data:
        lo, hi = f.lower_bounds.get(field_id), f.upper_bounds.get(field_id)
        lo_v = from_bytes(TimestampType(), lo) if lo is not None else None
        hi_v = from_bytes(TimestampType(), hi) if hi is not None else None
        if lo_v is not None and lo_v == hi_v and lo_v in by_micros and not deletes:
            out[by_micros[lo_v]].files.append(f)
            continue
        for us, h in by_micros.items():
            if lo_v is None or hi_v is None or lo_v <= us <= hi_v:
                out[h].mixed.append(f)
    return out


def _append_files(tx: Transaction, new_files: Sequence[DataFile], properties: dict[str, str]) -> None:
    """Add ``new_files`` as a merge append: existing manifests carried over by reference, small ones merged."""
    with tx.update_snapshot(snapshot_properties=properties).merge_append() as fa:
        for f in new_files:
            fa.append_data_file(f)


class HourMovedError(CommitFailedException):
    """Another writer changed an hour's files after this ingest planned an append to them (not retried here)."""


def commit_hours(
    catalog: Catalog,
    identifier: str,
    hour_column: str,
    replace: Sequence[datetime],
    new_files: list[DataFile],
    properties: dict[str, str],
    keep: Mapping[datetime, frozenset[str]] | None = None,
    before_commit: BeforeCommitHook | None = None,
    planned_on: int | None = None,
) -> tuple[int | None, int]:
    """One commit: the ``replace`` hours' rows swapped for theirs in ``new_files``, the rest appended; returns
    (snapshot id, attempts). ``keep``: hours whose live files must still be exactly the given paths (those an append
    was planned on, read from snapshot ``planned_on``), else :class:`HourMovedError` and nothing committed. Other
    hours are never touched."""
    keep = keep or {}
    if not replace and not new_files:
        return catalog.load_table(identifier).metadata.current_snapshot_id, 0

    def attempt(n: int) -> int | None:
        table = catalog.load_table(identifier)
        # Still on the snapshot the append was planned on: nothing committed since, so the hours' files are those.
        if keep and (planned_on is None or table.metadata.current_snapshot_id != planned_on):
            now = hour_files(table, hour_column, list(keep))
            if moved := [h for h, paths in keep.items() if now[h].paths != paths]:
                raise HourMovedError(
                    f"{identifier}: arrival hour {moved[0]:%Y-%m-%d %H:00} was changed by another writer after this "
                    "ingest planned its append; nothing committed: re-run the partition (it plans anew)"
                )
        found = list(hour_files(table, hour_column, replace).values()) if replace else []
        old = list({f.file_path: f for hf in found for f in [*hf.files, *hf.mixed]}.values())
        if not old and not new_files:
            return table.metadata.current_snapshot_id
        if before_commit is not None and n == 1:
            before_commit(identifier)
        before = table.metadata
        with transaction(table) as tx:
            if not old:  # new hours and appends: no overwrite reading every manifest to find deletes
                _append_files(tx, new_files, properties)
            elif not any(hf.mixed for hf in found):  # metadata-only: each old file holds one of the hours
                with tx.update_snapshot(snapshot_properties=properties).overwrite() as ow:
                    for f in old:
                        ow.delete_data_file(f)
                    for f in new_files:
                        ow.append_data_file(f)
            else:  # compacted files: rewritten copy-on-write, still one catalog commit
                tx.delete(In(hour_column, [h.isoformat() for h in replace]), snapshot_properties=properties)
                if new_files:
                    _append_files(tx, new_files, properties)
            expired = stage_early_expiry(tx, before, datetime.now(UTC))
        if expired:
            try:
                delete_expired_metadata(table, before, expired)
            except OSError as exc:  # committed already; what is left unreferenced goes to the orphan sweep
                log.warning("%s: could not delete the files of expired snapshots: %s", identifier, exc)
        committed = table.metadata.current_snapshot_id
        _drop_dead_manifests(table, identifier)
        return committed

    hours = sorted({*replace, *keep})
    verb = "replace" if not keep else "append to" if not replace else "replace/append"
    what = f"{hours[0]:%Y-%m-%d %H:00}" + (f" .. {hours[-1]:%Y-%m-%d %H:00}" if len(hours) > 1 else "")
    return retry_on_conflict(f"{identifier}: {verb} {what}", attempt)


def _drop_dead_manifests(table: Table, identifier: str) -> None:
    """Consolidate the table's manifests once :data:`DEAD_MANIFESTS_MAX` of them hold no live file."""
    if (snap := table.current_snapshot()) is None:
        return
    dead = [
        m
        for m in snap.manifests(table.io)
        if m.content == ManifestContent.DATA and not (m.added_files_count or 0) + (m.existing_files_count or 0)
    ]
    if len(dead) < DEAD_MANIFESTS_MAX:
        return
    try:
        rewrite_manifests(table, max_manifests=0)
    except CommitFailedException as exc:  # the data is committed; the next commit tries again
        log.warning("%s: manifests not consolidated: %s", identifier, exc)
