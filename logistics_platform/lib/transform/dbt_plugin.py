"""dbt-duckdb plugin (named in profiles.yml): every dbt connection loads the Iceberg extensions from their PyPI
packages and binds ``bronze.<table>`` views to the catalog's CURRENT metadata, never a stale snapshot."""

from __future__ import annotations

import duckdb
from dbt.adapters.duckdb.plugins import BasePlugin

from logistics_platform.lib.bronze.views import ensure_ops_tables, refresh_bronze_views
from logistics_platform.lib.connections import load_extensions
from logistics_platform.settings import load_settings


class Plugin(BasePlugin):
    def configure_connection(self, conn: duckdb.DuckDBPyConnection) -> None:
        settings = load_settings()
        load_extensions(conn, settings)
        refresh_bronze_views(conn, settings)
        ensure_ops_tables(conn)
