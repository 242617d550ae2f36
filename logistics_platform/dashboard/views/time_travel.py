"""Time travel: any mart today (main) against the same mart N days ago (its daily tag), measures and rows per day."""

from datetime import UTC, date, datetime

import altair as alt
import streamlit as st

from logistics_platform.dashboard import common
from logistics_platform.lib.dashboard.reader import empty_message, load_table
from logistics_platform.lib.dashboard.travel import compare, daily_tags, missing_tag_message, tag_snapshot, travel_tag
from logistics_platform.lib.transform.project import MART_MODELS

st.title("Time travel")
settings = common.settings()
today = datetime.now(UTC).date()
left, right = st.columns([3, 2])
mart = left.selectbox("Mart", MART_MODELS, index=MART_MODELS.index("fct_daily_revenue"))
table = load_table(common.catalog(settings), f"marts.{mart}")
if table is None or table.current_snapshot() is None:
    common.stop(empty_message(mart))
tags = daily_tags(table)
# Start on the newest tag when there is one (a fresh platform has a tag only after its first full day).
newest = (today - date.fromisoformat(tags[0].removeprefix("daily-"))).days if tags else 30
retention = max(1, settings.daily_tag_retention_days)
days = int(right.number_input("Days ago", min_value=1, max_value=retention, value=max(1, newest), step=1))
tag = travel_tag(today, days)
ago = f"{days} day{'' if days == 1 else 's'} ago"
st.caption(
    f"Today is main's head; {ago} is the tag {tag} (the state at the end of that UTC day). "
    f"Tags on marts.{mart}: {', '.join(tags[:6]) or 'none'}{' ...' if len(tags) > 6 else ''}."
)
snapshot = tag_snapshot(table, tag)
if snapshot is None:
    common.stop(missing_tag_message(mart, tag, tags))

now = common.mart(settings, mart)
then = common.mart(settings, mart, snapshot)
assert now is not None and then is not None  # the table exists: both states read
result = compare(tag, then, now)

rows = result.measures.set_index("measure")
cols = st.columns(3)
cols[0].metric(f"Rows {ago}", f"{int(rows.loc['rows', 'then']):,}")
cols[1].metric("Rows today", f"{int(rows.loc['rows', 'now']):,}", delta=f"{int(rows.loc['rows', 'change']):+,}")
changed = int((result.measures["change"] != 0).sum())
cols[2].metric("Measures that changed", f"{changed} of {len(result.measures)}")

if result.day_column is not None and not result.by_day.empty:
    st.subheader(f"Rows per day of {result.day_column}")
    chart = alt.Chart(result.by_day, mark="bar", height=300).encode(
        x=alt.X("yearmonthdate(day):O", title=f"{result.day_column} (UTC date)"),
        xOffset=alt.XOffset("state:N"),
        y=alt.Y("rows:Q", title="rows"),
        color=alt.Color(
            "state:N", title=None, scale=alt.Scale(domain=[f"then: {tag}", "now"], range=[common.MUTED, common.OK])
        ),
        tooltip=["state", "yearmonthdate(day):O", "rows"],
    )
    st.altair_chart(chart, width="stretch")

st.subheader("Measures then and now")
columns = {
    "then": st.column_config.NumberColumn(ago, format="%.2f"),
    "now": st.column_config.NumberColumn("today", format="%.2f"),
    "change": st.column_config.NumberColumn(format="%+.2f"),
}
st.dataframe(result.measures, hide_index=True, width="stretch", column_config=columns)
st.caption(
    f"Snapshot {then.snapshot_id} (tag {tag}, committed {then.committed_at:%Y-%m-%d %H:%M} UTC) against "
    f"snapshot {now.snapshot_id} (main, committed {now.committed_at:%Y-%m-%d %H:%M} UTC)."
)
