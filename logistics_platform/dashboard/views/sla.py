"""SLA now: the newest SLA window of every region, the recent windows' late share against the target, breaches."""

from __future__ import annotations

from datetime import timedelta

import altair as alt
import pandas as pd
import streamlit as st

from logistics_platform.dashboard import common
from logistics_platform.lib.dashboard.operations import sla_view

LOOKBACK_HOURS = (1, 3, 6, 12, 24, 72, 168)

st.title("SLA now")
settings = common.settings()
state = common.mart_or_stop(settings, "fct_region_sla")
target = settings.sla_late_share_max

hours = st.select_slider("Look back from the newest window", LOOKBACK_HOURS, value=6, format_func=lambda h: f"{h} h")
view = sla_view(state.rows, timedelta(hours=hours))
st.caption(
    f"Windows of {settings.sla_window_minutes} min. A window breaches with at least {settings.sla_min_deliveries} "
    f"deliveries and more than {target:.0%} of them late. Newest window: {view.newest_window:%Y-%m-%d %H:%M} UTC."
)

breached_now = view.latest[view.latest["breached"]]
cols = st.columns(4)
cols[0].metric("Regions breached now", len(breached_now), help="Regions whose newest window is breached.")
cols[1].metric(f"Breached windows, last {hours} h", len(view.breaches))
cols[2].metric(f"Late deliveries, last {hours} h", int(view.windows["late_deliveries"].sum()))
cols[3].metric("Orders overdue and open now", int(view.latest["overdue_open"].sum()))

if view.breaches.empty:
    st.success(f"No SLA breach in the last {hours} h.")
else:
    named = ", ".join(
        f"{r.region} at {r.window_start:%m-%d %H:%M} ({r.late_share:.0%} late of {r.deliveries})"
        for r in view.breaches.head(5).itertuples()
    )
    more = f" and {len(view.breaches) - 5} more" if len(view.breaches) > 5 else ""
    st.error(f"SLA breached: {named}{more}.")

st.subheader("Newest window per region")


def _highlight(row: pd.Series) -> list[str]:
    style = f"background-color: {common.ALERT}33; font-weight: 600" if row["breached"] else ""
    return [style] * len(row)


latest = view.latest[
    ["region", "window_start", "deliveries", "late_deliveries", "late_share", "overdue_open", "breached"]
]
st.dataframe(
    latest.style.apply(_highlight, axis=1).format({"late_share": "{:.1%}"}, na_rep="-"),
    hide_index=True,
    width="stretch",
)

st.subheader(f"Late share per window, last {hours} h")
windows = view.windows.assign(status=view.windows["breached"].map({True: "breached", False: "within SLA"}))
base = alt.Chart(windows).encode(
    x=alt.X("window_start:T", title="window (UTC)"),
    y=alt.Y("late_share:Q", title="late share", axis=alt.Axis(format="%")),
)
lines = base.mark_line(strokeWidth=1.5, opacity=0.7).encode(color=alt.Color("region:N", title="region"))
points = base.mark_point(filled=True, size=70).encode(
    color=alt.Color("region:N"),
    shape=alt.Shape(
        "status:N",
        title="window",
        scale=alt.Scale(domain=["within SLA", "breached"], range=["circle", "triangle-up"]),
    ),
    tooltip=["region", "window_start:T", "deliveries", "late_deliveries", alt.Tooltip("late_share:Q", format=".1%")],
)
breach_marks = (
    alt.Chart(windows[windows["breached"]])
    .mark_point(shape="triangle-up", size=260, color=common.ALERT, filled=True)
    .encode(x="window_start:T", y="late_share:Q")
)
rule = (
    alt.Chart(pd.DataFrame({"target": [target]})).mark_rule(color=common.ALERT, strokeDash=[6, 4]).encode(y="target:Q")
)
st.altair_chart(alt.layer(lines, points, breach_marks, rule).properties(height=320), width="stretch")

st.subheader(f"Deliveries and open overdue orders per window, last {hours} h")
volume = windows.melt(
    id_vars=["window_start", "region"], value_vars=["deliveries", "overdue_open"], var_name="count", value_name="n"
)
st.altair_chart(
    alt.Chart(volume)
    .mark_line(point=True)
    .encode(
        x=alt.X("window_start:T", title="window (UTC)"),
        y=alt.Y("n:Q", title="orders"),
        color=alt.Color("region:N"),
        strokeDash=alt.StrokeDash("count:N", title="count"),
        tooltip=["region", "window_start:T", "count", "n"],
    )
    .properties(height=260),
    width="stretch",
)

if not view.breaches.empty:
    st.subheader("Breached windows")
    st.dataframe(
        view.breaches[["window_start", "region", "deliveries", "late_deliveries", "late_share"]].style.format(
            {"late_share": "{:.1%}"}
        ),
        hide_index=True,
        width="stretch",
    )
common.published_caption(state)
