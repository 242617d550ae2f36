"""Read the marts for the dashboard: pyiceberg scans of the published Iceberg tables, never the DuckDB file, which
dbt holds locked while it builds (docs/internals/publish.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

BRONZE_NAMESPACE = "bronze"
BUILD_HINT = "run `make run` (or `logistics-platform run`) to ingest the landed hours and publish the marts"


@dataclass(frozen=True)
class MartState:
    """One state of a mart: its rows and the snapshot they were read from (None: the table has no snapshot)."""

    identifier: str
    snapshot_id: int | None
    committed_at: datetime | None
    rows: pa.Table


def load_table(catalog: Catalog, identifier: str) -> Table | None:
    """The Iceberg table, or None when it does not exist yet."""
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        return None


def read_snapshot(table: Table, snapshot_id: int | None) -> MartState:
    """The rows of ``table`` at ``snapshot_id`` (``main``'s head when None)."""
    identifier = ".".join(table.name()[-2:])
    snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    if snapshot is None:
        return MartState(identifier, None, None, table.schema().as_arrow().empty_table())
    committed = datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC)
    rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    return MartState(identifier, snapshot.snapshot_id, committed, rows)


def empty_message(mart: str) -> str:
    """The one line a page shows for a mart with nothing to show yet."""
    return f"marts.{mart} has no rows yet: {BUILD_HINT}."
