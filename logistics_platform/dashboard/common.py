"""What every page shares: the settings, the catalog, cached reads of the published marts, the empty state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import streamlit as st
from pyiceberg.catalog import Catalog

from logistics_platform.lib.connections import catalog_of
from logistics_platform.lib.dashboard.reader import MartState, empty_message, load_table, read_snapshot
from logistics_platform.settings import Settings, SettingsError, load_settings

# Colours shared by the charts: a breach or anomaly is always this red.
ALERT = "#d62728"
OK = "#1f77b4"
MUTED = "#9e9e9e"


def stop(message: str) -> NoReturn:
    """Show one line saying what to do, and draw nothing more of the page."""
    st.info(message)
    st.stop()


def settings() -> Settings:
    """The platform settings (environment variables); a bad value stops the page with its one-line error."""
    try:
        return load_settings()
    except SettingsError as exc:
        st.error(str(exc))
        st.stop()


# The caches below are keyed on what identifies the catalog (name, URI, warehouse, S3 access), not every setting.
BY_CATALOG: dict[str | type, Callable[[Any], Any]] = {
    Settings: lambda s: (s.catalog_name, sorted(s.catalog_properties.items()))
}


@st.cache_resource(show_spinner=False, hash_funcs=BY_CATALOG)
def catalog(s: Settings) -> Catalog:
    """One catalog per process and settings (opening it creates the namespaces only on an empty catalog)."""
    return catalog_of(s)


@st.cache_data(show_spinner=False, max_entries=64, hash_funcs=BY_CATALOG)
def _rows(s: Settings, identifier: str, snapshot_id: int) -> MartState:
    return read_snapshot(catalog(s).load_table(identifier), snapshot_id)


def mart(s: Settings, name: str, snapshot_id: int | None = None) -> MartState | None:
    """``marts.<name>`` at ``snapshot_id`` (default: ``main``), None when it was never published."""
    table = load_table(catalog(s), f"marts.{name}")
    if table is None:
        return None
    snapshot_id = snapshot_id if snapshot_id is not None else table.metadata.current_snapshot_id
    return read_snapshot(table, None) if snapshot_id is None else _rows(s, f"marts.{name}", snapshot_id)


def mart_or_stop(s: Settings, name: str) -> MartState:
    """The mart at ``main``, or the page stops with the one line saying what to run."""
    state = mart(s, name)
    if state is None or state.rows.num_rows == 0:
        stop(empty_message(name))
    return state


def published_caption(*states: MartState) -> None:
    """Which published snapshots the page shows (they change only when a publish passed its audit)."""
    parts = [f"{s.identifier} @ {s.committed_at:%Y-%m-%d %H:%M} UTC" for s in states if s.committed_at is not None]
    if parts:
        st.caption("Published snapshots shown: " + "; ".join(parts))
