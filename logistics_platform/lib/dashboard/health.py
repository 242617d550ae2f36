"""The pipeline health page's frames: the quarantine rate per arrival hour and the health of every Iceberg table."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import pandas as pd
from pyiceberg.catalog import Catalog

from logistics_platform.lib.bronze.ingest_log import IngestLogEntry
from logistics_platform.lib.dashboard.reader import load_table
from logistics_platform.lib.maintenance import list_iceberg_tables
from logistics_platform.lib.maintenance.health import TableHealth, table_health
from logistics_platform.lib.timekeys import parse_hour_key

HEALTH_COLUMNS = ["table", "snapshots", "data_files", "data_mib", "small_file_share", "manifests", "orphan_files"]
HEALTH_COLUMNS += ["orphan_mib"]


def quarantine_by_hour(ingested: Mapping[tuple[str, str], IngestLogEntry]) -> pd.DataFrame:
    """Per arrival hour of ``ingested``: lines landed, lines quarantined and their share (all topics together)."""
    rows = [(parse_hour_key(hour), e.lines, e.quarantined) for (_, hour), e in ingested.items()]
    frame = pd.DataFrame(rows, columns=["arrival_hour", "lines", "quarantined"])
    if frame.empty:
        return pd.DataFrame(columns=["arrival_hour", "lines", "quarantined", "quarantine_rate"])
    hourly = frame.groupby("arrival_hour", as_index=False)[["lines", "quarantined"]].sum().sort_values("arrival_hour")
    lines = hourly["lines"].astype("float64")
    hourly["quarantine_rate"] = (hourly["quarantined"] / lines.where(lines > 0)).fillna(0.0)
    return hourly.reset_index(drop=True)


def table_healths(catalog: Catalog, small_file_bytes: int, now: datetime) -> list[TableHealth]:
    """:func:`table_health` of every table in the bronze and marts namespaces."""
    tables = (load_table(catalog, i) for i in list_iceberg_tables(catalog))
    return [table_health(t, small_file_bytes=small_file_bytes, now=now) for t in tables if t is not None]


def health_frame(healths: list[TableHealth]) -> pd.DataFrame:
    """One row per table: snapshots, data files and bytes, small-file share, manifests, unreferenced files."""
    return pd.DataFrame(
        [
            {
                "table": h.table,
                "snapshots": h.snapshots,
                "data_files": h.data_files,
                "data_mib": round(h.data_bytes / 2**20, 2),
                "small_file_share": round(h.small_file_ratio, 3),
                "manifests": h.manifests_current,
                "orphan_files": h.orphan_files,
                "orphan_mib": round(h.orphan_bytes / 2**20, 2),
            }
            for h in healths
        ],
        columns=HEALTH_COLUMNS,
    )
