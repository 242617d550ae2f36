"""The dashboard's entry point (`streamlit run`): page setup and navigation between the six pages."""

import streamlit as st

from logistics_platform.dashboard import PAGES

st.set_page_config(page_title="Logistics operations", page_icon=":truck:", layout="wide")
navigation = st.navigation(
    [
        st.Page(PAGES / "sla.py", title="SLA now", icon=":material/timer:", url_path="sla", default=True),
        st.Page(PAGES / "delivery.py", title="Delivery time", icon=":material/schedule:", url_path="delivery"),
        st.Page(PAGES / "off_route.py", title="Off route", icon=":material/alt_route:", url_path="off-route"),
        st.Page(PAGES / "revenue.py", title="Revenue", icon=":material/payments:", url_path="revenue"),
        st.Page(PAGES / "time_travel.py", title="Time travel", icon=":material/history:", url_path="time-travel"),
        st.Page(PAGES / "health.py", title="Pipeline health", icon=":material/monitor_heart:", url_path="health"),
    ]
)
st.sidebar.caption("Reads the published Iceberg marts (main: audited publishes only).")
navigation.run()
