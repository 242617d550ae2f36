"""Several processes opening the catalog at once on an empty PostgreSQL database all get it.

Each one finds the catalog's own tables missing and creates them (pyiceberg's SqlCatalog), then the namespaces:
their DDL and inserts race, and the losers see a duplicate-table or duplicate-key error from PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from threading import Barrier
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from logistics_platform.lib.connections import NAMESPACES, load_catalog
from logistics_platform.settings import Settings, local_settings
from tests.support.processes import run_lined_up

pytestmark = pytest.mark.postgres

OPENERS = 4
DEADLINE_S = 300  # an upper bound of the wait, not a measurement


def _open(settings: Settings, barrier: Barrier, results: Any, n: int) -> None:
    barrier.wait(timeout=120)  # every opener starts on the empty database together
    try:
        results[n] = sorted(".".join(ns) for ns in load_catalog(settings).list_namespaces())
    except Exception as exc:
        results[n] = f"{type(exc).__name__}: {exc}"


def test_openers_racing_to_create_the_catalog_tables_all_succeed(tmp_path: Path, pg_database: str) -> None:
    settings = local_settings(tmp_path, catalog_uri=pg_database)
    outcome = run_lined_up(_open, {n: (settings,) for n in range(OPENERS)}, DEADLINE_S).results
    assert outcome == {n: sorted(NAMESPACES) for n in range(OPENERS)}
    engine = create_engine(pg_database)
    with engine.connect() as con:
        rows = con.execute(text("select namespace, count(*) from iceberg_namespace_properties group by 1")).all()
    engine.dispose()
    assert sorted(rows) == [(ns, 1) for ns in sorted(NAMESPACES)]  # each namespace created once
