"""The SLA page's two charts on one time axis: the regions x windows heatmap and the deliveries per window."""

from __future__ import annotations

from datetime import datetime

import altair as alt
import pandas as pd

from logistics_platform.dashboard.common import ALERT, MUTED, OK
from logistics_platform.lib.dashboard import sla
from logistics_platform.lib.timekeys import hour_start

SHARE_COLOURS = ["#66bd63", "#fee08b", "#b2182b"]  # late share: green when none, yellow at the target, red when all
NO_DELIVERIES_FILL = "#e2e2e2"
OPEN_HOUR_FILL = "#dde7f3"
NOW_COLOUR = "#111111"
OPEN_DASH = [3, 2]
TO_COME_DASH = [1, 2]
FADED = 0.5  # opacity of the cells not judged (fewer deliveries than the SLA minimum)
ROW_PX = 30
AXES_PX = 110  # height of what the heatmap draws besides its rows: legend, "now" label, time axis
Y_AXIS_PX = 110  # width of the left margin (region names) in both charts, so that their time axes line up
VOLUME_PX = 230
# Time labels: hours as 24 h clock times, a new day by its date.
TIME_FORMAT = {"hours": "%H:%M", "minutes": "%H:%M", "date": "%b %d", "month": "%b %d"}


def time_scale(first_hour: datetime, last_hour: datetime) -> alt.Scale:
    """The hours ``first_hour`` .. ``last_hour`` on a UTC scale (the times are naive UTC)."""
    ends = (first_hour, last_hour + sla.HOUR)
    domain = [
        alt.DateTime(year=t.year, month=t.month, date=t.day, hours=t.hour, minutes=t.minute, utc=True) for t in ends
    ]
    return alt.Scale(type="utc", domain=domain)


def time_axis(scale: alt.Scale) -> alt.X:
    """The windows' x encoding on ``scale``."""
    return alt.X(
        "window_start:T", title="window (UTC)", scale=scale, axis=alt.Axis(format=TIME_FORMAT, labelOverlap=True)
    )


def _labelled(frame: pd.DataFrame) -> pd.DataFrame:
    # The window as text for the tooltips, and its middle for marks drawn at a point.
    return frame.assign(
        window=frame["window_start"].dt.strftime("%m-%d %H:%M") + frame["window_end"].dt.strftime("-%H:%M"),
        window_mid=frame["window_start"] + (frame["window_end"] - frame["window_start"]) / 2,
    )


def heatmap(
    cells: pd.DataFrame, rule: sla.SlaRule, regions: list[str], first_hour: datetime, last_hour: datetime, now: datetime
) -> alt.LayerChart | alt.FacetChart:
    """Late share per region and window, breaches marked, the open hour shaded, ``now`` a rule."""
    scale = time_scale(first_hour, last_hour)
    x = time_axis(scale)
    y = alt.Y("region:N", title=None, sort=regions, axis=alt.Axis(minExtent=Y_AXIS_PX, maxExtent=Y_AXIS_PX))
    cells = _labelled(cells)
    tooltip: list[str | alt.Tooltip] = ["region:N", alt.Tooltip("window:N", title="window (UTC)"), "status:N"]
    tooltip += ["deliveries:Q", alt.Tooltip("late_deliveries:Q", title="late")]
    tooltip += [alt.Tooltip("late_share:Q", title="late share", format=".1%")]
    tooltip += [alt.Tooltip("overdue_open:Q", title="overdue and open")]

    def rects(status: str | None = None) -> alt.Chart:
        rows = cells[cells["deliveries"] > 0] if status is None else cells[cells["status"] == status]
        return alt.Chart(rows).encode(x=x, x2="window_end:T", y=y, tooltip=tooltip)

    present = set(cells["status"])
    open_hour = hour_start(now)
    layers: list[alt.Chart] = []
    if first_hour <= open_hour <= last_hour:
        hour = pd.DataFrame({"window_start": [open_hour], "window_end": [open_hour + sla.HOUR]})
        layers.append(alt.Chart(hour).mark_rect(color=OPEN_HOUR_FILL).encode(x=x, x2="window_end:T"))
    if sla.NO_DELIVERIES in present:
        layers.append(rects(sla.NO_DELIVERIES).mark_rect(color=NO_DELIVERIES_FILL))
    if sla.TO_COME in present:
        layers.append(rects(sla.TO_COME).mark_rect(filled=False, stroke=MUTED, strokeDash=TO_COME_DASH))
    if (cells["deliveries"] > 0).any():
        share = alt.Scale(domain=[0, rule.late_share_max, 1], range=SHARE_COLOURS, clamp=True, interpolate="rgb")
        colour = alt.Color("late_share:Q", title="late share", scale=share, legend=alt.Legend(format="%", orient="top"))
        # Judged: enough deliveries in a window that has ended; anything else is drawn faded.
        is_judged = (alt.datum.deliveries >= rule.min_deliveries) & (alt.datum.status != sla.OPEN)
        judged = alt.condition(is_judged, alt.value(1.0), alt.value(FADED))
        # On white first: a faded cell then looks the same inside the shaded open hour as outside it.
        layers.append(rects().mark_rect(color="white"))
        layers.append(rects().mark_rect(stroke="white", strokeWidth=0.5).encode(color=colour, opacity=judged))
    if sla.OPEN in present:
        layers.append(rects(sla.OPEN).mark_rect(filled=False, stroke=NOW_COLOUR, strokeWidth=1.5, strokeDash=OPEN_DASH))
    if sla.BREACHED in present:
        layers.append(rects(sla.BREACHED).mark_rect(filled=False, stroke=ALERT, strokeWidth=2.5))
        layers.append(
            alt.Chart(cells[cells["status"] == sla.BREACHED])
            .mark_text(text="!", fontWeight="bold", fontSize=15, color="white")
            .encode(x=alt.X("window_mid:T", scale=scale), y=y, tooltip=tooltip)
        )
    if first_hour <= open_hour <= last_hour:
        marker = alt.Chart(pd.DataFrame({"now": [now]})).encode(x=alt.X("now:T", scale=scale))
        layers.append(marker.mark_rule(color=NOW_COLOUR, strokeWidth=2))
        label = marker.mark_text(align="right", baseline="bottom", dx=-3, dy=-2, fontWeight="bold", color=NOW_COLOUR)
        layers.append(label.encode(y=alt.value(0), text=alt.value(f"now {now:%H:%M}")))
    return alt.layer(*layers).properties(height=max(4, len(regions)) * ROW_PX + AXES_PX)


def volume(cells: pd.DataFrame, first_hour: datetime, last_hour: datetime) -> alt.Chart:
    """Deliveries of all regions per window, late stacked on on-time, on the heatmap's time axis."""
    bars = _labelled(sla.deliveries_per_window(cells))
    kinds = alt.Scale(domain=["on time", "late"], range=[OK, ALERT])
    return alt.Chart(bars, mark="rect", height=VOLUME_PX).encode(
        x=time_axis(time_scale(first_hour, last_hour)),
        x2="window_end:T",
        y=alt.Y("low:Q", title=None, axis=alt.Axis(minExtent=Y_AXIS_PX, maxExtent=Y_AXIS_PX, tickMinStep=1)),
        y2="high:Q",
        color=alt.Color("kind:N", title=None, scale=kinds, legend=alt.Legend(orient="top")),
        tooltip=[alt.Tooltip("window:N", title="window (UTC)"), "kind:N", "count:Q"],
    )
