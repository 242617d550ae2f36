"""The off-route page's reads: the episodes of marts.fct_courier_off_route, and for one episode its order's corridor
(bronze.orders) and the courier's pings around it (bronze.tracking_pings, that courier and time range only)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.expressions import And, EqualTo, GreaterThanOrEqual, LessThanOrEqual

from logistics_platform.lib.contract import ORDER_COORDINATES
from logistics_platform.lib.dashboard.reader import BRONZE_NAMESPACE, load_table

# Pings shown before the episode's first and after its last off-route ping (the way out and back).
MARGIN = timedelta(minutes=15)
KM_PER_DEGREE = 6371.0088 * math.pi / 180  # the mart's earth radius


def episodes_view(rows: pa.Table) -> pd.DataFrame:
    """The episodes, the current ones (no end yet) first, then newest first; ``last_off_at`` and a ``label``."""
    frame = rows.to_pandas()
    frame["current"] = frame["ended_at"].isna()
    frame["last_off_at"] = frame["started_at"] + pd.to_timedelta(frame["minutes"], unit="min")
    keys = frame[["courier_id", "order_id", "started_at"]].itertuples(index=False)
    frame["label"] = [f"courier {c}, order {o}, from {s:%m-%d %H:%M}" for c, o, s in keys]
    return frame.sort_values(["current", "started_at"], ascending=False).reset_index(drop=True)


@dataclass(frozen=True)
class Track:
    """An episode on the map: its corridor (pickup, drop-off; None when the order has no coordinates in bronze) and the
    courier's pings from ``MARGIN`` before to ``MARGIN`` after it, each with its distance from the corridor."""

    corridor: tuple[float, float, float, float] | None
    pings: pd.DataFrame


def read_corridor(catalog: Catalog, order_id: int) -> tuple[float, float, float, float] | None:
    """pickup_lat, pickup_lon, dropoff_lat, dropoff_lon of the order's newest change that has them."""
    table = load_table(catalog, f"{BRONZE_NAMESPACE}.orders")
    if table is None or not set(ORDER_COORDINATES) <= set(table.schema().column_names):
        return None
    rows = table.scan(EqualTo("order_id", order_id), selected_fields=("_lsn", *ORDER_COORDINATES)).to_arrow()
    known = [r for r in rows.sort_by("_lsn").to_pylist() if None not in (r[c] for c in ORDER_COORDINATES)]
    return (
        (known[-1]["pickup_lat"], known[-1]["pickup_lon"], known[-1]["dropoff_lat"], known[-1]["dropoff_lon"])
        if known
        else None
    )


def read_track(catalog: Catalog, courier_id: int, order_id: int, first: datetime, last: datetime) -> Track:
    """The episode's corridor and the courier's pings recorded from ``first - MARGIN`` to ``last + MARGIN``."""
    corridor = read_corridor(catalog, order_id)
    table = load_table(catalog, f"{BRONZE_NAMESPACE}.tracking_pings")
    fields = ("ping_id", "lat", "lon", "recorded_at")
    # _event_time is recorded_at: the files' statistics on it (the table's sort order) skip the rest of the table.
    since = GreaterThanOrEqual("_event_time", (first - MARGIN).isoformat())
    until = LessThanOrEqual("_event_time", (last + MARGIN).isoformat())
    scan = table.scan(And(EqualTo("courier_id", courier_id), since, until), selected_fields=fields) if table else None
    pings = pd.DataFrame(columns=fields) if scan is None else scan.to_arrow().to_pandas()
    pings = pings.drop_duplicates("ping_id").sort_values(["recorded_at", "ping_id"]).reset_index(drop=True)
    at = zip(pings["lat"], pings["lon"], strict=True)
    pings["distance_km"] = [distance_km(corridor, lat, lon) for lat, lon in at] if corridor else math.nan
    return Track(corridor, pings)


def distance_km(corridor: tuple[float, float, float, float], lat: float, lon: float) -> float:
    """Km from (lat, lon) to the pickup -> drop-off segment, on the plane tangent at its mean latitude (the mart's)."""
    lat0, lon0, lat1, lon1 = corridor
    scale = math.cos(math.radians((lat0 + lat1) / 2))
    x, y = (lon - lon0) * scale * KM_PER_DEGREE, (lat - lat0) * KM_PER_DEGREE
    dx, dy = (lon1 - lon0) * scale * KM_PER_DEGREE, (lat1 - lat0) * KM_PER_DEGREE
    along = 0.0 if dx == dy == 0 else max(0.0, min(1.0, (x * dx + y * dy) / (dx * dx + dy * dy)))
    return math.hypot(x - along * dx, y - along * dy)
