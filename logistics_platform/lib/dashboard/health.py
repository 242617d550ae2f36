"""The pipeline health page: ingest backlog, quarantine rate per arrival hour, and the health of every Iceberg table."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pyarrow as pa
from pyiceberg.catalog import Catalog

from logistics_platform.lib.dashboard.reader import BRONZE_NAMESPACE, MARTS_NAMESPACE, load_table
from logistics_platform.lib.maintenance import list_iceberg_tables
from logistics_platform.lib.maintenance.health import TableHealth, table_health
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.operate.progress import Backlog, backlog, read_ingest_log
from logistics_platform.settings import Settings

INGEST_LOG = f"{BRONZE_NAMESPACE}.ingest_log"
HEALTH_COLUMNS = ["table", "snapshots", "data_files", "data_mib", "small_file_share", "manifests", "orphan_files"]
HEALTH_COLUMNS += ["orphan_mib"]


def backlog_now(settings: Settings, catalog: Catalog) -> Backlog:
    """Landed hours, files and lines not (or not in their current form) ingested yet."""
    scan = scan_landing(settings.landing_dir, lookback_days=None)
    return backlog(scan, read_ingest_log(catalog), settings.landing_dir)


def read_ingest_lines(catalog: Catalog) -> pa.Table:
    """topic, arrival_hour, lines, quarantined of every ingested hour (empty when nothing was ingested)."""
    schema = pa.schema(
        {"topic": pa.string(), "arrival_hour": pa.timestamp("us"), "lines": pa.int64(), "quarantined": pa.int64()}
    )
    table = load_table(catalog, INGEST_LOG)
    if table is None or table.current_snapshot() is None:
        return schema.empty_table()
    return table.scan(selected_fields=tuple(schema.names)).to_arrow()


def quarantine_by_hour(ingest_lines: pa.Table) -> pd.DataFrame:
    """Per arrival hour: lines landed, lines quarantined and their share (all topics together)."""
    frame = ingest_lines.to_pandas()
    if frame.empty:
        return pd.DataFrame(columns=["arrival_hour", "lines", "quarantined", "quarantine_rate"])
    hourly = frame.groupby("arrival_hour", as_index=False)[["lines", "quarantined"]].sum().sort_values("arrival_hour")
    lines = hourly["lines"].astype("float64")
    hourly["quarantine_rate"] = (hourly["quarantined"] / lines.where(lines > 0)).fillna(0.0)
    return hourly.reset_index(drop=True)


def table_healths(catalog: Catalog, small_file_bytes: int, now: datetime) -> list[TableHealth]:
    """:func:`table_health` of every table in the bronze and marts namespaces."""
    tables = (load_table(catalog, i) for i in list_iceberg_tables(catalog, (BRONZE_NAMESPACE, MARTS_NAMESPACE)))
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
