"""Dagster resources, built from :class:`Settings` (local and prod differ only in their settings)."""

from __future__ import annotations

from typing import Any

from dagster_duckdb import DuckDBResource

from logistics_platform.lib.transform.project import dbt_resource
from logistics_platform.settings import Settings


def build_resources(settings: Settings) -> dict[str, Any]:
    """Resource key -> resource. ``settings`` is handed to assets as a plain resource value."""
    return {
        "settings": settings,
        "duckdb": DuckDBResource(database=str(settings.duckdb_path)),
        "dbt": dbt_resource(settings),
    }
