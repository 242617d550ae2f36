"""DuckDB connections with the Iceberg extensions loaded from their PyPI packages (no downloads)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from duckdb_extensions import import_extension

EXTENSIONS = ("parquet", "avro", "iceberg")


def load_extensions(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Install (from the local wheel files) and load the extensions that ``iceberg_scan`` needs."""
    con.execute("set autoinstall_known_extensions = false")
    for name in EXTENSIONS:
        try:
            con.execute(f"load {name}")
        except duckdb.Error:
            import_extension(name, con=con)
            con.execute(f"load {name}")
    return con


def connect(path: str | Path | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection (in-memory when ``path`` is None) ready to read Iceberg tables."""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:" if path is None else str(path), read_only=read_only)
    return load_extensions(con)
