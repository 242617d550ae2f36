"""Revenue: daily revenue by tenant and tier (gross, courier, platform, tenant share), over a chosen range of days."""

import altair as alt
import streamlit as st

from logistics_platform.dashboard import common
from logistics_platform.lib.dashboard.operations import revenue_by_tenant, revenue_by_tier

# Tiers keep their colours whatever the selection.
TIERS = alt.Scale(domain=["bronze", "silver", "gold", "unknown"], range=["#b07d48", "#8e9aa6", "#d4a017", common.MUTED])

st.title("Daily revenue by tenant and tier")
settings = common.settings()
revenue = common.mart_or_stop(settings, "fct_daily_revenue")
tenants = common.mart_or_stop(settings, "dim_tenant")
frame = revenue_by_tier(revenue.rows, tenants.rows)

first, last = frame["revenue_date"].min(), frame["revenue_date"].max()
left, right = st.columns([2, 3])
picked = left.date_input("Days", (first, last), min_value=first, max_value=last)
start, end = (picked[0], picked[-1]) if isinstance(picked, tuple) and picked else (first, last)
tiers = sorted(frame["tier"].unique())
chosen = right.multiselect("Tiers", tiers, default=tiers)
shown = frame[(frame["revenue_date"] >= start) & (frame["revenue_date"] <= end) & frame["tier"].isin(chosen)]
if shown.empty:
    common.stop("No revenue in the days and tiers picked: widen the range or add a tier.")

cols = st.columns(4)
cols[0].metric("Gross revenue", f"{shown['gross_revenue'].sum():,.2f}")
cols[1].metric("Platform revenue", f"{shown['platform_revenue'].sum():,.2f}")
cols[2].metric("Tenant revenue", f"{shown['tenant_revenue'].sum():,.2f}")
cols[3].metric("Orders delivered", f"{int(shown['orders_delivered'].sum()):,}")

st.subheader("Gross revenue per day, by tier")
chart = alt.Chart(shown, mark="bar", height=300).encode(
    x=alt.X("yearmonthdate(revenue_date):O", title="revenue date (UTC)"),
    y=alt.Y("sum(gross_revenue):Q", title="gross revenue"),
    color=alt.Color("tier:N", scale=TIERS),
    tooltip=["tier", "yearmonthdate(revenue_date):O", alt.Tooltip("sum(gross_revenue):Q", format=",.2f")],
)
st.altair_chart(chart, width="stretch")

st.subheader("Per tenant")
per_tenant = revenue_by_tenant(shown)
chart = alt.Chart(per_tenant.head(20), mark="bar", height=max(120, 26 * min(len(per_tenant), 20))).encode(
    y=alt.Y("tenant_name:N", sort="-x", title=None),
    x=alt.X("gross_revenue:Q", title="gross revenue"),
    color=alt.Color("tier:N", scale=TIERS),
    tooltip=["tenant_id", "tenant_name", "tier", alt.Tooltip("gross_revenue:Q", format=",.2f")],
)
st.altair_chart(chart, width="stretch")
amounts = ("gross_revenue", "courier_revenue", "platform_revenue", "tenant_revenue")
money = {c: st.column_config.NumberColumn(format="%.2f") for c in amounts}
st.dataframe(per_tenant, hide_index=True, width="stretch", column_config=money)
common.published_caption(revenue, tenants)
