"""Several processes opening the catalog at once on an empty PostgreSQL database all get it.

Each one finds the catalog's own tables missing and creates them (pyiceberg's SqlCatalog), then the namespaces:
their DDL and inserts race, and the losers see a duplicate-table or duplicate-key error from PostgreSQL.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from threading import Barrier
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from logistics_platform.lib.connections import NAMESPACES, load_catalog
from logistics_platform.settings import Settings, local_settings

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
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier, results = manager.Barrier(OPENERS), manager.dict()
        openers = [ctx.Process(target=_open, args=(settings, barrier, results, n)) for n in range(OPENERS)]
        for p in openers:
            p.start()
        for p in openers:
            p.join(timeout=DEADLINE_S)
        stuck = [p for p in openers if p.is_alive()]
        for p in stuck:
            p.kill()
        assert not stuck, f"{len(stuck)} opener(s) did not finish"
        outcome = dict(results)
    assert outcome == {n: sorted(NAMESPACES) for n in range(OPENERS)}
    engine = create_engine(pg_database)
    with engine.connect() as con:
        rows = con.execute(text("select namespace, count(*) from iceberg_namespace_properties group by 1")).all()
    engine.dispose()
    assert sorted(rows) == [(ns, 1) for ns in sorted(NAMESPACES)]  # each namespace created once
