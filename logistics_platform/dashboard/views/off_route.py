"""Couriers off route: the current episodes on a map (corridor and pings, drawn offline on lon/lat), and the history."""

import altair as alt
import pandas as pd
import streamlit as st

from logistics_platform.dashboard import common
from logistics_platform.lib.dashboard.off_route import MARGIN, episodes_view, read_corridor, read_pings

st.title("Couriers off route")
settings = common.settings()
state = common.mart_or_stop(settings, "fct_courier_off_route")
episodes = episodes_view(state.rows)
current = episodes[episodes["current"]]
st.caption(
    f"An episode: an active order's courier more than {settings.off_route_km:g} km from the straight pickup -> "
    f"drop-off line for at least {settings.off_route_minutes:g} min; current until the courier is back or the order "
    "is no longer active. Each new episode is alerted once (check couriers_on_route)."
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
corridor = read_corridor(catalog, int(episode.order_id))
pings = read_pings(catalog, int(episode.courier_id), episode.started_at, episode.last_off_at)
pings["ping"] = pings["in_episode"].map({True: "the episode (off route)", False: "before / after"})
xy = {"x": alt.X("lon:Q", scale=alt.Scale(zero=False)), "y": alt.Y("lat:Q", scale=alt.Scale(zero=False))}
layers = [alt.Chart(pings).mark_line(color=common.MUTED, opacity=0.5).encode(**xy, order="recorded_at:T")]
if corridor is None:
    st.info(f"Order {episode.order_id} has no coordinates in bronze.orders: only the pings are drawn.")
else:
    ends = pd.DataFrame({"lat": corridor[::2], "lon": corridor[1::2], "point": ["pickup", "drop-off"]})
    layers.append(alt.Chart(ends).mark_line(strokeWidth=4, color=common.OK).encode(**xy))
    layers.append(alt.Chart(ends).mark_square(size=160, color=common.OK).encode(**xy, tooltip=["point"]))
colour = alt.Color("ping:N", scale=alt.Scale(range=[common.MUTED, common.ALERT]), title=None)
tooltip = ["recorded_at:T", "ping_id"]
layers.append(alt.Chart(pings).mark_circle(size=70).encode(**xy, color=colour, tooltip=tooltip))
st.subheader(f"Courier {episode.courier_id}, order {episode.order_id}")
st.altair_chart(alt.layer(*layers).properties(height=460), width="stretch")
st.caption(
    f"Longitude and latitude, no map tiles. Blue: the corridor's centre line, pickup to drop-off. Dots: the courier's "
    f"{len(pings)} pings from {MARGIN.seconds // 60} min before the episode to {MARGIN.seconds // 60} min after it."
)

st.subheader("History")
per_day = episodes.assign(day=episodes["started_at"].dt.floor("D")).groupby(["day", "region"], as_index=False).size()
bars = alt.Chart(per_day).mark_bar().encode(x=alt.X("day:T", title="day (UTC)"), y=alt.Y("size:Q", title="episodes"))
st.altair_chart(bars.encode(color="region:N").properties(height=200), width="stretch")
columns = ["courier_id", "order_id", "region", "started_at", "ended_at", "minutes", "pings", "max_distance_km"]
formats = {c: st.column_config.NumberColumn(format="%.2f") for c in ("minutes", "max_distance_km")}
st.dataframe(episodes[columns], hide_index=True, width="stretch", column_config=formats)
common.published_caption(state)
