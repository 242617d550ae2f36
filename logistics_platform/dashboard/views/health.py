"""Pipeline health: the ingest backlog, the quarantine rate per arrival hour, and the health of every Iceberg table."""

from __future__ import annotations

from datetime import UTC, datetime

import altair as alt
import pandas as pd
import streamlit as st

from logistics_platform.dashboard import common
from logistics_platform.lib.dashboard import health as pipeline
from logistics_platform.lib.dashboard.reader import BUILD_HINT
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.operate.progress import backlog, read_ingest_log
from logistics_platform.settings import Settings


@st.cache_data(show_spinner="Measuring the tables...", ttl=60, hash_funcs=common.BY_CATALOG)
def _health(s: Settings, small_file_bytes: int) -> pd.DataFrame:
    # Reads every table's manifests and lists its files: worth a minute's cache, not one per click.
    return pipeline.health_frame(pipeline.table_healths(common.catalog(s), small_file_bytes, datetime.now(UTC)))


st.title("Pipeline health")
settings = common.settings()
catalog = common.catalog(settings)

st.subheader("Backlog")
ingested = read_ingest_log(catalog)  # the backlog and the quarantine rate both read it
state = backlog(scan_landing(settings.landing_dir, lookback_days=None), ingested, settings.landing_dir)
cols = st.columns(4)
cols[0].metric("Hours waiting for ingest", len(state.hours_pending))
cols[1].metric("Files waiting", state.files_pending)
cols[2].metric("Lines waiting", f"{state.lines_pending:,}")
cols[3].metric("Newest hour ingested", state.latest_ingested or "-")
if state.latest_landed is None:
    common.stop(f"No landed hour in {settings.landing_dir}: land data there (or `logistics-platform generate`).")
if state.hours_pending:
    oldest = ", ".join(state.hours_pending[:3]) + (" ..." if len(state.hours_pending) > 3 else "")
    st.warning(
        f"{len(state.hours_pending)} landed hours wait for ingest (oldest {oldest}): check that the landing sensor and "
        "the hourly schedule run, or `logistics-platform run`."
    )
else:
    st.success(f"Every landed hour is ingested (newest landed {state.latest_landed}).")

st.subheader("Quarantine rate per arrival hour")
hourly = pipeline.quarantine_by_hour(ingested)
if hourly.empty:
    st.info(f"Nothing ingested yet: {BUILD_HINT}.")
else:
    total_lines, total_bad = int(hourly["lines"].sum()), int(hourly["quarantined"].sum())
    st.caption(
        f"{total_bad:,} of {total_lines:,} landed lines quarantined ({total_bad / max(total_lines, 1):.2%}); "
        "every quarantined line is in bronze.quarantine with its reason."
    )
    chart = alt.Chart(hourly, mark="bar", height=240).encode(
        x=alt.X("arrival_hour:T", title="arrival hour (UTC)"),
        y=alt.Y("quarantine_rate:Q", title="quarantined share", axis=alt.Axis(format="%")),
        color=alt.condition(alt.datum.quarantined > 0, alt.value(common.ALERT), alt.value(common.OK)),
        tooltip=["arrival_hour:T", "lines", "quarantined", alt.Tooltip("quarantine_rate:Q", format=".2%")],
    )
    st.altair_chart(chart, width="stretch")

st.subheader("Tables")
health = _health(settings, settings.compaction_small_file_bytes)
if health.empty:
    common.stop(f"No Iceberg table yet: {BUILD_HINT}.")
chart = alt.Chart(health, mark="bar", height=max(160, 22 * len(health))).encode(
    y=alt.Y("table:N", sort="-x", title=None),
    x=alt.X("data_files:Q", title="data files"),
    color=alt.Color("small_file_share:Q", title="small-file share", scale=alt.Scale(scheme="orangered")),
    tooltip=["table", "snapshots", "data_files", "data_mib", "small_file_share", "manifests", "orphan_files"],
)
st.altair_chart(chart, width="stretch")
st.dataframe(health, hide_index=True, width="stretch")
st.caption(
    "Small files are below COMPACTION_SMALL_FILE_BYTES; the nightly `logistics-platform maintain` compacts them, "
    "expires snapshots and removes orphan files."
)
