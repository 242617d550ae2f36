"""The SLA page's frames: fct_region_sla as cells of a regions x windows heatmap, the open hour's windows as they fill.
A window is judged only once it has ended (docs/internals/publish.md); times are naive UTC."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd
import pyarrow as pa

from logistics_platform.lib.dashboard.operations import to_frame
from logistics_platform.lib.timekeys import hour_start, utc_naive

HOUR = timedelta(hours=1)
# What each cell is at ``now``.
BREACHED = "breached"
WITHIN = "within SLA"
TOO_FEW = "too few deliveries"  # below the minimum: not judged, whatever its late share
NO_DELIVERIES = "no deliveries"  # a row for its open overdue orders only
OPEN = "open"
TO_COME = "to come"
COUNTS = ["deliveries", "late_deliveries", "overdue_open"]
CELL_COLUMNS = ["window_start", "window_end", "region", *COUNTS, "late_share", "breached", "status"]


@dataclass(frozen=True)
class SlaRule:
    """The SLA settings the mart was built with: window width, minimum deliveries, largest late share allowed."""

    window: timedelta
    min_deliveries: int
    late_share_max: float


def window_of(moment: datetime, width: timedelta) -> datetime:
    """Start of the window ``moment`` falls in (windows are aligned to the hour, their width divides it)."""
    moment = utc_naive(moment)
    start = hour_start(moment)
    return start + ((moment - start) // width) * width


def status_of(window_end: datetime, deliveries: int, breached: bool, rule: SlaRule, now: datetime) -> str:
    """What a window with a row in the mart is at ``now``: open until it ends, then judged by the mart's rule."""
    if window_end > now:
        return OPEN
    if deliveries == 0:
        return NO_DELIVERIES
    if breached:
        return BREACHED
    return TOO_FEW if deliveries < rule.min_deliveries else WITHIN


def window_frame(sla: pa.Table, rule: SlaRule, now: datetime) -> pd.DataFrame:
    """Every row of fct_region_sla with its window_end and its status at ``now``, oldest window first."""
    frame = to_frame(sla)
    if frame.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    now = utc_naive(now)
    frame["window_start"] = frame["window_start"].astype("datetime64[us]")
    frame["window_end"] = frame["window_start"] + rule.window
    frame["status"] = [
        status_of(end, int(n), bool(b), rule, now)
        for end, n, b in zip(frame["window_end"], frame["deliveries"], frame["breached"], strict=True)
    ]
    return frame[CELL_COLUMNS].sort_values(["window_start", "region"]).reset_index(drop=True)


def hour_options(frame: pd.DataFrame, now: datetime, max_hours: int = 168) -> list[datetime]:
    """The hours a range can start or end on: up to ``max_hours`` back from the open hour (or the newest window)."""
    open_hour = hour_start(now)
    if frame.empty:
        return [open_hour]
    first = hour_start(frame["window_start"].min().to_pydatetime())
    last = min(hour_start(frame["window_start"].max().to_pydatetime()), open_hour)
    start = max(first, last - (max_hours - 1) * HOUR)
    return [start + i * HOUR for i in range(int((open_hour - start) / HOUR) + 1)]


def default_range(options: list[datetime], frame: pd.DataFrame, now: datetime, hours: int) -> tuple[datetime, datetime]:
    """The ``hours`` hours up to the open hour, or up to the newest window when none falls in them (opens on data)."""
    end = hour_start(now)
    if not frame.empty:
        newest = hour_start(frame["window_start"].max().to_pydatetime())
        end = newest if newest < end - (hours - 1) * HOUR else end
    start = max(options[0], end - (hours - 1) * HOUR)
    return start, end


def heatmap_cells(
    frame: pd.DataFrame, rule: SlaRule, now: datetime, first_hour: datetime, last_hour: datetime
) -> pd.DataFrame:
    """The mart's windows in ``first_hour`` .. ``last_hour``, plus a cell per region for the open hour's windows."""
    now = utc_naive(now)
    end = last_hour + HOUR
    shown = frame[(frame["window_start"] >= first_hour) & (frame["window_start"] < end)]
    open_hour = hour_start(now)
    regions = sorted(frame["region"].unique())
    placeholders: list[dict[str, object]] = []
    if first_hour <= open_hour < end and regions:
        have = set(zip(shown["window_start"], shown["region"], strict=True))
        window = window_of(now, rule.window)
        starts = [window + i * rule.window for i in range(int((open_hour + HOUR - window) / rule.window))]
        for start in starts:
            status = OPEN if start == window else TO_COME
            placeholders.extend(
                {"window_start": start, "window_end": start + rule.window, "region": r, "status": status}
                for r in regions
                if (pd.Timestamp(start), r) not in have
            )
    if not placeholders:
        return shown.reset_index(drop=True)
    extra = pd.DataFrame(placeholders).assign(deliveries=0, late_deliveries=0, overdue_open=0, breached=False)
    extra["late_share"] = float("nan")
    cells = pd.concat([shown, extra[CELL_COLUMNS].astype(shown.dtypes.to_dict())], ignore_index=True)
    return cells.sort_values(["window_start", "region"]).reset_index(drop=True)


def breaches(cells: pd.DataFrame) -> pd.DataFrame:
    """The breached (closed) windows among ``cells``, newest first."""
    out = cells[cells["status"] == BREACHED]
    return out.sort_values(["window_start", "region"], ascending=[False, True]).reset_index(drop=True)


def latest_closed(frame: pd.DataFrame) -> pd.DataFrame:
    """Each region's newest window that has ended (what "now" means for a judged window), breached regions first."""
    closed = frame[frame["status"] != OPEN]
    latest = closed.sort_values("window_start").groupby("region", as_index=False).tail(1)
    return latest.sort_values(["breached", "region"], ascending=[False, True]).reset_index(drop=True)


def open_windows(cells: pd.DataFrame) -> pd.DataFrame:
    """The open windows of ``cells`` with deliveries so far, most deliveries first."""
    out = cells[(cells["status"] == OPEN) & (cells["deliveries"] > 0)]
    return out.sort_values(["deliveries", "region"], ascending=[False, True]).reset_index(drop=True)


def deliveries_per_window(cells: pd.DataFrame) -> pd.DataFrame:
    """Deliveries of all regions per window, stacked bar segments (``low`` .. ``high``) per kind, on time first."""
    per = cells.groupby(["window_start", "window_end"], as_index=False)[["deliveries", "late_deliveries"]].sum()
    on_time = per.assign(kind="on time", low=0, high=per["deliveries"] - per["late_deliveries"])
    late = per.assign(kind="late", low=on_time["high"], high=per["deliveries"])
    out = pd.concat([on_time, late], ignore_index=True).assign(count=lambda f: f["high"] - f["low"])
    columns = ["window_start", "window_end", "kind", "count", "low", "high"]
    return out[columns].sort_values(["window_start", "low"], kind="stable").reset_index(drop=True)
