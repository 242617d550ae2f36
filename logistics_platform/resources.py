"""Dagster resources, built from :class:`Settings` (local and prod differ only in their settings)."""

from __future__ import annotations

from typing import Any

from dagster_duckdb import DuckDBResource

from logistics_platform.settings import Settings


def build_resources(settings: Settings) -> dict[str, Any]:
    """Resource key -> resource. ``settings`` is handed to assets as a plain resource value.

    dbt is not a resource: the dbt assets run dbt in the step's own process (lib/transform/dbt_inprocess.py).
    """
    return {
        "settings": settings,
        "duckdb": DuckDBResource(database=str(settings.duckdb_path)),
    }
