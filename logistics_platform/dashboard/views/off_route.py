"""Couriers off route: the current episodes on a map (corridor and pings, drawn offline on lon/lat), and the history."""

import altair as alt
import pandas as pd
import streamlit as st

from logistics_platform.dashboard import common
from logistics_platform.lib.dashboard.off_route import MARGIN, episodes_view, read_track

MARGIN_MIN = MARGIN.total_seconds() / 60

st.title("Couriers off route")
settings = common.settings()
state = common.mart_or_stop(settings, "fct_courier_off_route")
episodes = episodes_view(state.rows)
current = episodes[episodes["current"]]
st.caption(
    f"An episode: an active order's courier farther than {settings.off_route_km:g} km from the straight pickup -> "
    f"drop-off line for at least {settings.off_route_minutes:g} min; current while its order is active and the courier "
    "has not come back. Each new episode is alerted once (check couriers_on_route)."
)
if current.empty:
    st.success("No courier off route now.")
else:
    named = "; ".join(
        f"courier {e.courier_id} on order {e.order_id} since {e.started_at:%m-%d %H:%M} UTC "
        f"({e.minutes:.0f} min, up to {e.max_distance_km:.1f} km)"
        for e in current.head(5).itertuples()
    )
    st.warning(f"Off route now: {named}" + (f" and {len(current) - 5} more." if len(current) > 5 else "."))

label = st.selectbox("Episode on the map", episodes["label"], help="Current episodes first, then newest first.")
episode = episodes[episodes["label"] == label].iloc[0]
catalog = common.catalog(settings)
track = read_track(catalog, int(episode.courier_id), int(episode.order_id), episode.started_at, episode.last_off_at)
off = track.pings["distance_km"].gt(settings.off_route_km)
pings = track.pings.assign(where=off.map({True: "off route", False: "in corridor"}))
xy = {"x": alt.X("lon:Q", scale=alt.Scale(zero=False)), "y": alt.Y("lat:Q", scale=alt.Scale(zero=False))}
layers = [alt.Chart(pings).mark_line(color=common.OK, opacity=0.4).encode(**xy, order="recorded_at:T")]
if track.corridor is None:
    st.info(f"Order {episode.order_id} has no coordinates in bronze.orders: only the pings are drawn.")
else:
    ends = pd.DataFrame({"lat": track.corridor[::2], "lon": track.corridor[1::2], "point": ["pickup", "drop-off"]})
    layers.append(alt.Chart(ends).mark_line(strokeWidth=3, color=common.MUTED).encode(**xy))
    layers.append(alt.Chart(ends).mark_square(size=160, color=common.MUTED).encode(**xy, tooltip=["point"]))
colour = alt.Color("where:N", scale=alt.Scale(domain=["in corridor", "off route"], range=[common.OK, common.ALERT]))
tooltip = ["recorded_at:T", alt.Tooltip("distance_km:Q", format=".2f"), "ping_id"]
layers.append(alt.Chart(pings).mark_circle(size=70).encode(**xy, color=colour, tooltip=tooltip))
st.subheader(f"Courier {episode.courier_id}, order {episode.order_id}")
st.altair_chart(alt.layer(*layers).properties(height=460), width="stretch")
st.caption(
    f"Longitude and latitude (drawn offline: no map tiles). Grey: the corridor's centre line, pickup to drop-off. "
    f"Dots: the courier's {len(pings)} pings from {MARGIN_MIN:g} min before the episode to {MARGIN_MIN:g} min after, "
    "red beyond the corridor."
)

st.subheader("History")
per_day = episodes.assign(day=episodes["started_at"].dt.floor("D")).groupby(["day", "region"], as_index=False).size()
bars = alt.Chart(per_day).mark_bar().encode(x=alt.X("day:T", title="day (UTC)"), y=alt.Y("size:Q", title="episodes"))
st.altair_chart(bars.encode(color="region:N").properties(height=200), width="stretch")
columns = ["courier_id", "order_id", "region", "started_at", "ended_at", "minutes", "pings", "max_distance_km"]
formats = {c: st.column_config.NumberColumn(format="%.2f") for c in ("minutes", "max_distance_km")}
st.dataframe(episodes[columns], hide_index=True, width="stretch", column_config=formats)
common.published_caption(state)
