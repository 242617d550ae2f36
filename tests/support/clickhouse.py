"""Read published Iceberg tables with ClickHouse's own engine (chdb, embedded) and compare them with DuckDB's reads.

ClickHouse's ``icebergLocal`` is pointed at the metadata file the catalog names (``iceberg_metadata_file_path``), as
DuckDB's ``iceberg_scan`` is, rather than left to pick the newest file in ``metadata/``; it then reads the
``current-snapshot-id`` of that file, which is ``main``'s (a publish's ``audit`` branch has its ref in the same file).

Both sides meet in one DuckDB connection, ClickHouse's rows as Arrow; columns compare by name, order and type, rows as
multisets (EXCEPT ALL both ways). The one normalisation: ClickHouse reads an Iceberg ``timestamp`` (no zone) as
``DateTime64(6)`` and labels it with its session time zone in Arrow (``timestamp[us, tz=...]``); the label is dropped
and the stored microseconds kept, which is all the Iceberg type holds. Decimals, dates, doubles and the rest compare
as they come, exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import chdb
import duckdb
import pyarrow as pa
import pytest
from chdb.state.sqlitelike import Connection as ClickHouse
from pyiceberg.table import Table

from logistics_platform.lib import connections as duck
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.settings import Settings

__all__ = [
    "ClickHouse",
    "assert_same_as_duckdb",
    "clickhouse_rows",
    "compare_published_marts",
    "embedded_clickhouse",
    "run_inside",
]


def _local(uri: str) -> str:
    return uri.removeprefix("file://")


@contextmanager
def embedded_clickhouse(session_timezone: str | None = None) -> Iterator[ClickHouse]:
    """An embedded ClickHouse (chdb) connection (in ``session_timezone`` if given), closed on leaving."""
    conn = chdb.connect(":memory:" if session_timezone is None else f":memory:?session_timezone={session_timezone}")
    try:
        yield conn
    finally:
        conn.close()


def run_inside(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    """Run from the warehouse, the one place embedded ClickHouse lets ``icebergLocal`` read."""
    # icebergLocal reads only under the engine's user_files_path, which chdb sets to "." (the working directory,
    # resolved at each query); in chdb 4.4 neither a user_files_path nor a config-file connection option changes it.
    monkeypatch.chdir(_local(settings.warehouse))


def _zone_dropped(rows: pa.Table) -> pa.Table:
    """Timestamps without ClickHouse's session-zone label (the same microseconds since the epoch)."""
    fields = [
        pa.field(f.name, pa.timestamp(f.type.unit), f.nullable)
        if pa.types.is_timestamp(f.type) and f.type.tz is not None
        else f
        for f in rows.schema
    ]
    return rows.cast(pa.schema(fields))


def clickhouse_rows(ch: ClickHouse, table: Table, snapshot_id: int | None = None) -> pa.Table:
    """``table`` as ``icebergLocal`` reads it from the catalog's current metadata file (at ``snapshot_id`` if given)."""
    snapshot = f" SETTINGS iceberg_snapshot_id = {int(snapshot_id)}" if snapshot_id is not None else ""
    sql = (
        f"SELECT * FROM icebergLocal('{_local(table.location())}', "
        f"SETTINGS iceberg_metadata_file_path = '{_local(table.metadata_location)}'){snapshot}"
    )
    return _zone_dropped(ch.query(sql, "ArrowTable"))


def assert_same_as_duckdb(con: duckdb.DuckDBPyConnection, clickhouse: pa.Table, table: Table, what: str) -> int:
    """ClickHouse's rows equal DuckDB's ``iceberg_scan`` of ``table`` (fails naming ``what``); their count."""
    con.register("clickhouse", clickhouse)
    scan = f"select * from iceberg_scan('{table.metadata_location}')"
    try:
        ch_types = [(c[0], c[1]) for c in con.sql("describe clickhouse").fetchall()]
        duck_types = [(c[0], c[1]) for c in con.sql(f"describe {scan}").fetchall()]
        assert ch_types == duck_types, f"{what}: columns/types differ: ClickHouse {ch_types} DuckDB {duck_types}"
        only_ch = con.sql(f"select * from clickhouse except all {scan}").fetchall()
        only_duck = con.sql(f"{scan} except all select * from clickhouse").fetchall()
        assert not only_ch and not only_duck, (
            f"{what}: rows only ClickHouse read {only_ch[:3]}, only DuckDB read {only_duck[:3]}"
        )
    finally:
        con.unregister("clickhouse")
    return clickhouse.num_rows


def compare_published_marts(settings: Settings, ch: ClickHouse) -> dict[str, int]:
    """Mart -> rows, every mart of ``MART_MODELS`` read by ClickHouse and by DuckDB from ``main`` and found equal."""
    catalog = load_catalog(settings)
    con = duck.connect(settings=settings)
    try:
        return {
            mart: assert_same_as_duckdb(con, clickhouse_rows(ch, table), table, f"marts.{mart}")
            for mart in MART_MODELS
            for table in [catalog.load_table(("marts", mart))]
        }
    finally:
        con.close()
