"""dbt-duckdb plugin: every dbt connection reads the CURRENT bronze Iceberg snapshots.

dbt-duckdb instantiates ``Plugin`` from ``profiles.yml`` (its ``plugins`` entry names this module) and calls
``configure_connection`` once per connection. We load the Iceberg extensions from their PyPI packages (DuckDB cannot
download them here) and (re)create ``bronze.<table>`` views on the metadata file that the SQL catalog
points at *now*, so ``dbt build``, ``dbt test`` and ``dbt docs generate`` never read a stale, hard-coded snapshot.
"""

from __future__ import annotations

from typing import Any

import duckdb
from dbt.adapters.duckdb.plugins import BasePlugin

from logistics_platform.lib.bronze.views import ensure_ops_tables, refresh_bronze_views
from logistics_platform.lib.connections import load_extensions
from logistics_platform.settings import load_settings


class Plugin(BasePlugin):
    """Loads extensions and binds ``bronze.*`` views to the catalog's current metadata."""

    def initialize(self, plugin_config: dict[str, Any]) -> None:
        pass

    def configure_connection(self, conn: duckdb.DuckDBPyConnection) -> None:
        # Settings come from the environment settings.dbt_environment() applied when the dbt process started.
        settings = load_settings()
        load_extensions(conn, settings)
        refresh_bronze_views(conn, settings)
        ensure_ops_tables(conn)
