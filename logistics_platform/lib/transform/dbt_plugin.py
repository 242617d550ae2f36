"""dbt-duckdb plugin: every dbt connection reads the CURRENT bronze Iceberg snapshots.

dbt-duckdb instantiates ``Plugin`` from ``profiles.yml`` (its ``plugins`` entry names this module) and calls
``configure_connection`` once per connection. We load the Iceberg extensions from their PyPI packages (DuckDB cannot
download them here) and (re)create ``bronze.<table>`` views on the metadata file that the SQL catalog
points at *now*, so ``dbt build``, ``dbt test`` and ``dbt docs generate`` never read a stale, hard-coded snapshot.
"""

from __future__ import annotations

from pathlib import Path
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
        # Settings come from the env that applied_environment()/subprocess_env() built, read per connection: in-process,
        # dbt-duckdb keeps one plugin instance across invocations on the same DuckDB file.
        load_extensions(conn)
        self._attach_target(conn)
        refresh_bronze_views(conn, load_settings())
        ensure_ops_tables(conn)

    def _attach_target(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Attach the profile's target database file now and make it this connection's default catalog.

        With the local profile, dbt-duckdb opens an in-memory instance and attaches the file only after the plugins
        ran (its own ATTACH IF NOT EXISTS is then a no-op); the bronze views and ops tables belong in the file.
        """
        if self.creds is None:
            return
        for attachment in self.creds.attach or []:
            if attachment.alias == self.creds.database:
                conn.execute(attachment.to_sql())
                conn.execute(f"use {attachment.alias}")
                # Spill next to the file, as DuckDB does for a database opened by path (not into the working dir).
                spill = str(Path(attachment.path).expanduser().resolve()) + ".tmp"
                conn.execute("set temp_directory = " + "'" + spill.replace("'", "''") + "'")
