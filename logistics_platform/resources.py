"""Dagster resources, built from :class:`Settings` (local and prod differ only in their settings)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dagster_dbt import DbtCliResource
from dagster_duckdb import DuckDBResource

from logistics_platform.settings import DBT_PROJECT_DIR, Settings


def build_resources(settings: Settings) -> dict[str, Any]:
    """Resource key -> resource. ``settings`` is handed to assets as a plain resource value."""
    return {
        "settings": settings,
        "duckdb": DuckDBResource(database=str(settings.duckdb_path)),
        "dbt": DbtCliResource(
            project_dir=str(DBT_PROJECT_DIR),
            profiles_dir=str(DBT_PROJECT_DIR),
            target=settings.dbt_target,
            # The dbt installed beside this interpreter, whether or not the venv is on PATH.
            dbt_executable=str(Path(sys.executable).parent / "dbt"),
        ),
    }
