"""`setup`: prepare local state (DuckDB extensions, catalog, namespaces, dbt manifest) so later steps run offline."""

from __future__ import annotations

import argparse

from logistics_platform.lib.connections import catalog_of, connect, preflight
from logistics_platform.settings import load_settings

HELP = "create the catalog and namespaces, install DuckDB extensions offline and parse the dbt project"


def run(args: argparse.Namespace) -> int:
    settings = load_settings()
    preflight(settings)  # a closed port, wrong login, missing database or bucket: one line naming the setting
    connect(settings=settings).close()
    catalog_of(settings)  # creates the catalog tables and the namespaces
    print(f"catalog ready: {settings.catalog_uri} (warehouse {settings.warehouse})")
    # A build step (as a deployment's image build does it), parsed again only when the project's files change.
    from logistics_platform.lib.transform.project import ensure_manifest

    print(f"dbt manifest ready: {ensure_manifest(settings)}")
    return 0
