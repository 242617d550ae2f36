"""Compare what `make run` left in two checkouts: every Iceberg table of the SQL catalog (bronze, marts) and every
DuckDB table (staging, intermediate, marts, ops), as multisets both ways (EXCEPT ALL), with the same Iceberg schema.

Usage: `.venv/bin/python scripts/compare_trees.py OLD_CHECKOUT NEW_CHECKOUT` after `make run` in both. Only the
columns that hold a Dagster run id (`_staged_by`, `run_id`) are left out: they differ between any two runs.
The catalog is read under the name `make run` wrote it with (`ICEBERG_CATALOG_NAME`, read by the platform's settings),
and opened with pyiceberg directly, not `load_catalog`, which would create namespaces in the catalogs it compares.
Exits 1 and names the tables when anything differs, or when a checkout's catalog lists no table under that name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb
from pyiceberg.catalog.sql import SqlCatalog

from logistics_platform.settings import load_settings

RUN_ID_COLUMNS = {"_staged_by", "run_id"}


def _catalog(root: Path, name: str) -> SqlCatalog:
    warehouse = root / "iceberg_warehouse"
    return SqlCatalog(name, uri=f"sqlite:///{warehouse / 'catalog.db'}", warehouse=f"file://{warehouse}")


def _differences(con: duckdb.DuckDBPyConnection, left: str, right: str, columns: list[str]) -> tuple[int, int]:
    keep = ", ".join(f'"{c}"' for c in columns if c not in RUN_ID_COLUMNS)
    count = "select count(*) from (select {k} from {a} except all select {k} from {b})"
    only_left = con.sql(count.format(k=keep, a=left, b=right)).fetchone()
    only_right = con.sql(count.format(k=keep, a=right, b=left)).fetchone()
    return (only_left[0] if only_left else 0), (only_right[0] if only_right else 0)


def main(old: Path, new: Path) -> int:
    con = duckdb.connect()
    differ = []
    for root in (old, new):
        for state in ("catalog.db", "analytics.duckdb"):  # SqlCatalog would create a missing catalog file
            if not (root / "iceberg_warehouse" / state).is_file():
                sys.exit(f"{root}: no iceberg_warehouse/{state}; run `make run` there first")
    catalog_name = load_settings().catalog_name
    old_catalog, new_catalog = _catalog(old, catalog_name), _catalog(new, catalog_name)
    names = [
        sorted(".".join(t) for ns in c.list_namespaces() for t in c.list_tables(ns)) for c in (old_catalog, new_catalog)
    ]
    for root, listed in zip((old, new), names, strict=True):
        if not listed:  # a wrong path or catalog name lists nothing, and nothing would compare "equal"
            sys.exit(f"{root}: its catalog lists no table as {catalog_name!r}; run `make run` there first")
    differ += [f"iceberg {n}: in one checkout only" for n in sorted(set(names[0]) ^ set(names[1]))]
    for name in sorted(set(names[0]) & set(names[1])):
        a, b = old_catalog.load_table(name).scan().to_arrow(), new_catalog.load_table(name).scan().to_arrow()
        con.register("old_table", a)
        con.register("new_table", b)
        only_old, only_new = _differences(con, "old_table", "new_table", a.column_names)
        same = only_old == only_new == 0 and a.schema.equals(b.schema)
        print(
            f"{'equal' if same else 'DIFFER'}  iceberg {name:36s} {a.num_rows:>9,} rows",
            f"only old {only_old}, only new {only_new}",
        )
        differ += [] if same else [f"iceberg {name}"]
    for alias, root in (("old", old), ("new", new)):
        con.execute(f"attach '{root / 'iceberg_warehouse' / 'analytics.duckdb'}' as {alias} (read_only)")
    listing = (
        "select table_schema, table_name from information_schema.tables where table_catalog = ? "
        "and table_type = 'BASE TABLE' and table_schema not in ('bronze', 'main')"
    )
    relations = [set(con.execute(listing, [alias]).fetchall()) for alias in ("old", "new")]
    differ += [f"duckdb {s}.{t}: in one checkout only" for s, t in sorted(relations[0] ^ relations[1])]
    for schema, table in sorted(relations[0] & relations[1]):
        columns = [
            c
            for (c,) in con.execute(
                "select column_name from information_schema.columns where table_catalog = 'old' "
                "and table_schema = ? and table_name = ? order by ordinal_position",
                [schema, table],
            ).fetchall()
        ]
        only_old, only_new = _differences(con, f"old.{schema}.{table}", f"new.{schema}.{table}", columns)
        same = only_old == only_new == 0
        print(f"{'equal' if same else 'DIFFER'}  duckdb  {schema}.{table:36s} only old {only_old}, only new {only_new}")
        differ += [] if same else [f"duckdb {schema}.{table}"]
    print(f"{len(differ)} tables differ: {', '.join(differ)}" if differ else "every table equal")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: compare_trees.py OLD_CHECKOUT NEW_CHECKOUT (each after `make run`)")
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
