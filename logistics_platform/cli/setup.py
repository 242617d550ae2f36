"""`setup`: prepare local state (DuckDB extensions, catalog, namespaces) so later steps run offline."""

from __future__ import annotations

import argparse

from logistics_platform.lib.connections import connect, load_catalog, preflight
from logistics_platform.settings import load_settings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("setup", help="create the catalog, namespaces and install DuckDB extensions offline")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings()
    preflight(settings)  # a closed port, wrong login, missing database or bucket: one line naming the setting
    connect(settings=settings).close()
    load_catalog(settings)
    print(f"catalog ready: {settings.catalog_uri} (warehouse {settings.warehouse})")
    return 0
