"""The pyiceberg SQL catalog (SQLite locally, PostgreSQL in prod)."""

from __future__ import annotations

from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog

from logistics_platform.settings import Settings

NAMESPACES = ("bronze", "marts")


def load_catalog(settings: Settings) -> SqlCatalog:
    """Open the SQL catalog, creating local directories and the namespaces on first use."""
    if settings.catalog_uri.startswith("sqlite:///"):
        Path(settings.catalog_uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    if settings.warehouse.startswith("file://"):
        Path(settings.warehouse[len("file://") :]).mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(settings.catalog_name, **settings.catalog_properties)
    for ns in NAMESPACES:
        catalog.create_namespace_if_not_exists(ns)
    return catalog
