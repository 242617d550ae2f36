"""The off-route page's reads: marts.fct_courier_off_route's episodes, and for one episode its order's corridor
(bronze.orders) and the courier's pings around it (bronze.tracking_pings: that courier and time range only)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThanOrEqual

from logistics_platform.lib.contract import ORDER_COORDINATES
from logistics_platform.lib.dashboard.reader import BRONZE_NAMESPACE, load_table

# Pings shown before the episode's first and after its last off-route ping (the way out and back).
MARGIN = timedelta(minutes=15)
Corridor = tuple[float, float, float, float]  # pickup_lat, pickup_lon, dropoff_lat, dropoff_lon


def episodes_view(rows: pa.Table) -> pd.DataFrame:
    """The episodes, current ones (no end yet) first, then newest first; with ``last_off_at`` and a ``label``."""
    frame = rows.to_pandas()
    frame["current"] = frame["ended_at"].isna()
    frame["last_off_at"] = frame["started_at"] + pd.to_timedelta(frame["minutes"], unit="min")
    keys = frame[["courier_id", "order_id", "started_at"]].itertuples(index=False)
    frame["label"] = [f"courier {c}, order {o}, from {s:%m-%d %H:%M}" for c, o, s in keys]
    return frame.sort_values(["current", "started_at"], ascending=False).reset_index(drop=True)


def read_corridor(catalog: Catalog, order_id: int) -> Corridor | None:
    """The order's pickup and drop-off, from its newest change that has them (None when none has)."""
    table = load_table(catalog, f"{BRONZE_NAMESPACE}.orders")
    if table is None or not set(ORDER_COORDINATES) <= set(table.schema().column_names):
        return None
    rows = table.scan(EqualTo("order_id", order_id), selected_fields=("_lsn", *ORDER_COORDINATES)).to_arrow()
    known = [c for r in rows.sort_by("_lsn").to_pylist() if None not in (c := tuple(r[k] for k in ORDER_COORDINATES))]
    return known[-1] if known else None  # type: ignore[return-value]


def read_pings(catalog: Catalog, courier_id: int, first: datetime, last: datetime) -> pd.DataFrame:
    """The courier's pings (ping_id, lat, lon, recorded_at; a redelivered copy once) from ``first - MARGIN`` to
    ``last + MARGIN``; ``in_episode``: recorded from ``first`` to ``last``, the episode's own (all off route)."""
    fields = ("ping_id", "lat", "lon", "recorded_at")
    table = load_table(catalog, f"{BRONZE_NAMESPACE}.tracking_pings")
    # _event_time is recorded_at: the files' statistics on it (the table's sort order) skip the rest of the table.
    since = GreaterThanOrEqual("_event_time", f"{first - MARGIN:%Y-%m-%dT%H:%M:%S.%f}")  # microseconds, as stored
    until = LessThanOrEqual("_event_time", f"{last + MARGIN:%Y-%m-%dT%H:%M:%S.%f}")
    scan = table.scan(And(EqualTo("courier_id", courier_id), since, until), selected_fields=fields) if table else None
    pings = scan.to_arrow().to_pandas() if scan is not None else pd.DataFrame(columns=fields)
    pings = pings.drop_duplicates("ping_id").sort_values(["recorded_at", "ping_id"]).reset_index(drop=True)
    return pings.assign(in_episode=pings["recorded_at"].between(first, last))
