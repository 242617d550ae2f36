"""Delivery time: average delivery minutes per region and day against its trailing 7-day baseline, anomalies marked."""

import altair as alt
import streamlit as st

from logistics_platform.dashboard import common
from logistics_platform.lib.dashboard.operations import ANOMALY_SIGMAS, delivery_view

TABLE_COLUMNS = ["delivery_date", "region", "deliveries", "avg_delivery_minutes", "baseline_days"]
TABLE_COLUMNS += ["baseline_avg_minutes", "baseline_stddev_minutes", "is_anomaly"]
MINUTES = [alt.Tooltip("avg_delivery_minutes:Q", format=".1f"), alt.Tooltip("baseline_avg_minutes:Q", format=".1f")]
TOOLTIP = ["delivery_date:T", "deliveries", *MINUTES, "baseline_days"]

st.title("Delivery time per region")
settings = common.settings()
state = common.mart_or_stop(settings, "fct_region_delivery_daily")
frame = delivery_view(state.rows)
regions = sorted(frame["region"].unique())
chosen = st.multiselect("Regions", regions, default=regions)
shown = frame[frame["region"].isin(chosen)]
st.caption(
    "Average minutes from order to delivery per UTC day. The band is the baseline (the mean of the 7 days before, "
    f"when at least 3 have deliveries) +- {ANOMALY_SIGMAS:g} standard deviations; a day outside it is an anomaly."
)

newest_first = shown.sort_values(["delivery_date", "region"], ascending=[False, True])
anomalies = newest_first[newest_first["is_anomaly"]]
if anomalies.empty:
    st.success("No anomalous delivery day in the regions shown.")
else:
    named = ", ".join(
        f"{r.region} on {r.delivery_date:%Y-%m-%d} "
        f"({r.avg_delivery_minutes:.0f} min against a baseline of {r.baseline_avg_minutes:.0f})"
        for r in anomalies.head(5).itertuples()
    )
    st.warning(f"Anomalous delivery days: {named}.")

if shown.empty:
    common.stop("Pick at least one region.")

for region in chosen:
    data = shown[shown["region"] == region]
    base = alt.Chart(data).encode(x=alt.X("delivery_date:T", title="delivery date (UTC)"))
    band = base.mark_area(opacity=0.18, color=common.OK).encode(
        y=alt.Y("band_low:Q", title="minutes"), y2="band_high:Q"
    )
    baseline = base.mark_line(strokeDash=[5, 4], color=common.MUTED).encode(y="baseline_avg_minutes:Q")
    actual = base.mark_line(point=True, color=common.OK).encode(y="avg_delivery_minutes:Q", tooltip=TOOLTIP)
    marks = (
        alt.Chart(data[data["is_anomaly"]])
        .mark_point(shape="diamond", size=240, filled=True, color=common.ALERT)
        .encode(x="delivery_date:T", y="avg_delivery_minutes:Q")
    )
    chart = alt.layer(band, baseline, actual, marks).properties(height=180, title=f"{region}")
    st.altair_chart(chart, width="stretch")

st.subheader("Days and baselines")
columns = {
    "avg_delivery_minutes": st.column_config.NumberColumn("avg minutes", format="%.1f"),
    "baseline_avg_minutes": st.column_config.NumberColumn("baseline minutes", format="%.1f"),
    "baseline_stddev_minutes": st.column_config.NumberColumn("baseline stddev", format="%.2f"),
}
st.dataframe(newest_first[TABLE_COLUMNS], hide_index=True, width="stretch", column_config=columns)
common.published_caption(state)
