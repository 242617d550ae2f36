"""SLA now: late share per region and window as a heatmap over a range of hours, the open hour as it fills, breaches."""

from datetime import UTC, datetime, timedelta

import streamlit as st

from logistics_platform.dashboard import common, sla_charts
from logistics_platform.lib.dashboard import sla
from logistics_platform.lib.timekeys import hour_start

DEFAULT_HOURS = 6
TABLE_ROWS, TABLE_ROW_PX = 6, 35  # the tables show this many rows and scroll past them

st.title("SLA now")
settings = common.settings()
state = common.mart_or_stop(settings, "fct_region_sla")
width = timedelta(minutes=settings.sla_window_minutes)
rule = sla.SlaRule(width, settings.sla_min_deliveries, settings.sla_late_share_max)
now = datetime.now(UTC).replace(tzinfo=None)
open_hour = hour_start(now)
frame = sla.window_frame(state.rows, rule, now)

options = sla.hour_options(frame, now)
first, last = st.select_slider(
    "Hours shown (UTC)",
    options,
    value=sla.default_range(options, frame, now, DEFAULT_HOURS),
    format_func=lambda h: f"{h:%m-%d %H:00}" + (" (open)" if h == open_hour else ""),
)
cells = sla.heatmap_cells(frame, rule, now, first, last)
breaches = sla.breaches(cells)
latest = sla.latest_closed(frame)
filling = sla.open_windows(cells)
newest = frame["window_start"].max()
window = sla.window_of(now, rule.window)
st.caption(
    f"Windows of {settings.sla_window_minutes} min. A window is judged once it has ended: it breaches with at least "
    f"{rule.min_deliveries} deliveries and more than {rule.late_share_max:.0%} of them late. "
    f"Now {now:%Y-%m-%d %H:%M:%S} UTC: open hour {open_hour:%H:%M}-{open_hour + sla.HOUR:%H:%M}, "
    f"window {window:%H:%M}-{window + rule.window:%H:%M} filling. Newest window in the mart: {newest:%Y-%m-%d %H:%M}."
)

cols = st.columns(4)
cols[0].metric(
    "Regions breached now",
    int(latest["breached"].sum()),
    help="Regions whose newest window that has ended is breached.",
)
cols[1].metric("Breached windows shown", len(breaches))
cols[2].metric("Late deliveries shown", int(cells["late_deliveries"].sum()))
cols[3].metric(
    "Orders overdue and open now",
    int(latest["overdue_open"].sum()),
    help="At the end of each region's newest window that has ended.",
)

if newest < first:
    st.warning(
        f"Nothing published after the window of {newest:%Y-%m-%d %H:%M} UTC: check that the pipeline runs "
        "(`logistics-platform run`, or the sensors of `make dev`), or move the range back."
    )
elif not ((cells["deliveries"] > 0) | (cells["overdue_open"] > 0)).any():
    st.info("No delivery and no overdue order in the hours shown: move the range to see windows.")
elif breaches.empty:
    st.success("No breached window in the hours shown.")
else:
    named = ", ".join(
        f"{r.region} at {r.window_start:%m-%d %H:%M} ({r.late_share:.0%} late of {r.deliveries})"
        for r in breaches.head(5).itertuples()
    )
    more = f" and {len(breaches) - 5} more" if len(breaches) > 5 else ""
    st.error(f"SLA breached: {named}{more}.")

st.subheader("Late share per region and window")
regions = sorted(frame["region"].unique())
st.altair_chart(sla_charts.heatmap(cells, rule, regions, first, last, now), width="stretch")
st.caption(
    f"Colour: late share. Faded: not judged (fewer than {rule.min_deliveries} deliveries, or still open). Grey: "
    "open overdue orders but no delivery. Outlined in red with `!`: breached. Shaded: the open hour; the black rule "
    "is now, the dashed cells the window filling now, the dotted ones the windows to come. Hover a cell for its counts."
)

st.subheader("Deliveries per window, all regions")
st.altair_chart(sla_charts.volume(cells, first, last), width="stretch")

columns = {
    "window_start": st.column_config.DatetimeColumn("window (UTC)", format="MM-DD HH:mm"),
    "late_deliveries": st.column_config.NumberColumn("late"),
    "late_share": st.column_config.NumberColumn("late share", format="percent"),
}
shown_columns = ["window_start", "region", "deliveries", "late_deliveries", "late_share"]
tables = (
    ("Breached windows shown", breaches, "None in the hours shown."),
    ("Open windows, so far", filling, f"No delivery yet in the window {window:%H:%M}-{window + rule.window:%H:%M}."),
)
for column, (title, rows, none) in zip(st.columns(2), tables, strict=True):
    column.subheader(title)
    if rows.empty:
        column.caption(none)
    else:
        height = TABLE_ROW_PX * (min(len(rows), TABLE_ROWS) + 1) + 3
        column.dataframe(rows[shown_columns], hide_index=True, width="stretch", height=height, column_config=columns)
common.published_caption(state)
