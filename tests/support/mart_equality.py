"""Compare the marts Spark wrote into the Iceberg catalog with the marts DuckDB built in its database file.

Spark's are read with pyiceberg from a branch of each table (``main`` unless told: what every reader sees) and, on
``main``, with DuckDB's ``iceberg_scan`` too, which must read the same rows (any engine's reader would do: these are
plain Iceberg tables); both sides meet in one DuckDB connection. Types are compared as Iceberg types (DuckDB's through
the dbt contract's mapping), rows as multisets in both directions (EXCEPT ALL).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from logistics_platform.lib import connections as duck
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.settings import Settings

MAIN = "main"


def _same_rows(con: duckdb.DuckDBPyConnection, a: str, b: str, what: str) -> None:
    only_a = con.sql(f"{a} except all {b}").fetchall()
    only_b = con.sql(f"{b} except all {a}").fetchall()
    assert not only_a and not only_b, f"{what}: rows only in the first {only_a[:3]}, only in the second {only_b[:3]}"


def compare_marts(
    spark: Settings, duckdb_path: Path, marts: tuple[str, ...] = MART_MODELS, branch: str = MAIN
) -> dict[str, int]:
    """Mart -> row count; fails naming the mart and a few rows on any difference of columns, types or rows."""
    catalog = load_catalog(spark)
    con = duck.connect()
    con.execute(f"attach '{duckdb_path}' as built (read_only)")
    counts = {}
    for mart in marts:
        table = catalog.load_table(("marts", mart))
        ref = table.metadata.refs.get(branch)
        assert ref is not None, f"marts.{mart} has no branch {branch}: refs {sorted(table.metadata.refs)}"
        arrow = table.scan(snapshot_id=ref.snapshot_id).to_arrow()
        con.register(f"spark_{mart}", arrow)
        spark_types = con.sql(f"describe spark_{mart}").fetchall()
        duck_types = con.sql(f"describe built.marts.{mart}").fetchall()
        assert [(c[0], c[1]) for c in spark_types] == [(c[0], c[1]) for c in duck_types], (
            f"{mart}: columns/types differ: Spark {spark_types} DuckDB {duck_types}"
        )
        spark_rows = f"select * from spark_{mart}"
        _same_rows(con, spark_rows, f"select * from built.marts.{mart}", f"{mart}: Spark's vs DuckDB's")
        if branch == MAIN:
            scan = f"select * from iceberg_scan('{table.metadata_location}')"
            _same_rows(con, scan, spark_rows, f"{mart}: DuckDB iceberg_scan vs pyiceberg")
        counts[mart] = len(arrow)
    con.close()
    return counts
