"""Compare the marts Spark wrote into the Iceberg catalog with the marts DuckDB built in its database file.

Spark's are read with pyiceberg (any engine's reader would do: these are plain Iceberg tables); both sides meet in
one DuckDB connection. Types are compared as Iceberg types (DuckDB's through the dbt contract's mapping), rows as
multisets in both directions (EXCEPT ALL).
"""

from __future__ import annotations

from pathlib import Path

from logistics_platform.lib import connections as duck
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.settings import Settings


def compare_marts(spark: Settings, duckdb_path: Path, marts: tuple[str, ...] = MART_MODELS) -> dict[str, int]:
    """Mart -> row count; fails naming the mart and a few rows on any difference of columns, types or rows."""
    catalog = load_catalog(spark)
    con = duck.connect()
    con.execute(f"attach '{duckdb_path}' as built (read_only)")
    counts = {}
    for mart in marts:
        arrow = catalog.load_table(("marts", mart)).scan().to_arrow()
        con.register(f"spark_{mart}", arrow)
        spark_types = con.sql(f"describe spark_{mart}").fetchall()
        duck_types = con.sql(f"describe built.marts.{mart}").fetchall()
        assert [(c[0], c[1]) for c in spark_types] == [(c[0], c[1]) for c in duck_types], (
            f"{mart}: columns/types differ: Spark {spark_types} DuckDB {duck_types}"
        )
        a, b = f"select * from spark_{mart}", f"select * from built.marts.{mart}"
        only_spark = con.sql(f"{a} except all {b}").fetchall()
        only_duck = con.sql(f"{b} except all {a}").fetchall()
        assert not only_spark and not only_duck, (
            f"{mart}: rows only on Spark {only_spark[:3]}; rows only on DuckDB {only_duck[:3]}"
        )
        counts[mart] = len(arrow)
    con.close()
    return counts
