"""Order-independent checksum of a set of rows: proves that a rewrite kept the data identical."""

from __future__ import annotations

import duckdb
import pyarrow as pa

_MOD = 2**64


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def row_checksum(rows: pa.Table) -> str:
    """``<row count>:<sum of row hashes mod 2^64 in hex>``.

    A sum (not xor) so that duplicate rows, which bronze keeps on purpose, do not cancel out. DuckDB's
    hash is stable within one process, which is what a before/after comparison needs.
    """
    if rows.num_columns == 0:
        return f"{rows.num_rows}:0"
    con = duckdb.connect()
    try:
        con.register("rows_in", rows)
        args = ", ".join(_quote(n) for n in rows.column_names)
        count, total = con.execute(
            f"select count(*), coalesce(sum(hash({args})::hugeint), 0) % {_MOD} from rows_in"
        ).fetchone()  # type: ignore[misc]
    finally:
        con.close()
    return f"{count}:{int(total):016x}"
