"""Dagster resources built from :class:`Settings` (no config of their own: no secret reaches a job snapshot)."""

# No ``from __future__ import annotations``: Dagster reads the ResourceDependency annotations at runtime.
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr
from pyiceberg.catalog import Catalog

from logistics_platform.lib.connections import load_catalog, load_extensions
from logistics_platform.lib.transform.project import dbt_resource
from logistics_platform.settings import Settings


class IcebergCatalog(dg.ConfigurableResource):
    """The platform's pyiceberg SQL catalog, opened (and its namespaces created) once per run, then handed down."""

    settings: dg.ResourceDependency[Settings]
    _catalog: Catalog | None = PrivateAttr(default=None)

    def get_catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog(self.settings)
        return self._catalog


class LakehouseDuckDB(DuckDBResource):
    """dagster-duckdb's resource whose connections can read the Iceberg tables (extensions, S3 secret in prod)."""

    settings: dg.ResourceDependency[Settings]

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with super().get_connection() as con:
            yield load_extensions(con, self.settings)


def build_resources(settings: Settings) -> dict[str, Any]:
    """Resource key -> resource. ``settings`` is handed to assets as a plain resource value."""
    return {
        "settings": settings,
        "iceberg": IcebergCatalog(settings=settings),
        "duckdb": LakehouseDuckDB(database=str(settings.duckdb_path), settings=settings),
        "dbt": dbt_resource(settings),
    }
