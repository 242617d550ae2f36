"""ClickHouse's own engine (chdb, embedded) reads the published Iceberg marts with its ``icebergLocal`` table function.

Every mart of the session's ``embedded_run`` must be equal, row for row (a multiset, EXCEPT ALL both ways) and column
for column (names, order and types), to DuckDB's ``iceberg_scan`` of the same table: two engines that share no reader
code. ClickHouse is pointed at the metadata file the catalog names (``iceberg_metadata_file_path``), as DuckDB is,
rather than left to guess the newest file in ``metadata/``. It must read ``main``, the branch readers see: a publish
writes each mart's new snapshot on the branch ``audit`` first, and that branch's ref lives in the same metadata file.

Both sides meet in one DuckDB connection, ClickHouse's rows as Arrow. The one normalisation: ClickHouse labels an
Iceberg ``timestamp`` (no zone) with its session time zone (``DateTime64(6)`` -> ``timestamp[us, tz=...]``); the label
is dropped, keeping the stored microseconds, which is exactly what the Iceberg type holds. Decimals, dates, doubles
and the rest compare as they come, exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime
from decimal import Decimal

import chdb
import duckdb
import pyarrow as pa
import pytest
from chdb.state.sqlitelike import Connection as ClickHouse
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from logistics_platform.lib import connections as duck
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.settings import Settings
from tests.conftest import EmbeddedRun

pytestmark = pytest.mark.slow


def _local(uri: str) -> str:
    return uri.removeprefix("file://")


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
    """``table`` as ClickHouse's ``icebergLocal`` reads it from the catalog's current metadata file (or a snapshot)."""
    snapshot = f" SETTINGS iceberg_snapshot_id = {int(snapshot_id)}" if snapshot_id is not None else ""
    sql = (
        f"SELECT * FROM icebergLocal('{_local(table.location())}', "
        f"SETTINGS iceberg_metadata_file_path = '{_local(table.metadata_location)}'){snapshot}"
    )
    return _zone_dropped(ch.query(sql, "ArrowTable"))


def assert_same_as_duckdb(con: duckdb.DuckDBPyConnection, clickhouse: pa.Table, table: Table, what: str) -> int:
    """Fails naming ``what`` unless ClickHouse's rows equal DuckDB's ``iceberg_scan`` of ``table``; the row count."""
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


@pytest.fixture
def clickhouse(monkeypatch: pytest.MonkeyPatch) -> Iterator[ClickHouse]:
    """An embedded ClickHouse (chdb) connection, closed after the test."""
    conn = chdb.connect(":memory:")
    try:
        yield conn
    finally:
        conn.close()


def _inside(monkeypatch: pytest.MonkeyPatch, warehouse: str) -> None:
    # icebergLocal reads only under the engine's user_files_path, which embedded ClickHouse sets to "." (the working
    # directory, resolved at each query; chdb 4.4 takes no startup option for it): run from the warehouse.
    monkeypatch.chdir(_local(warehouse))


def test_clickhouse_reads_every_published_mart_as_duckdb_does(
    embedded_run: EmbeddedRun, clickhouse: ClickHouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = embedded_run.settings
    assert embedded_run.summary.ok
    _inside(monkeypatch, settings.warehouse)
    catalog = load_catalog(settings)
    con = duck.connect()
    counts = {}
    for mart in MART_MODELS:
        table = catalog.load_table(("marts", mart))
        counts[mart] = assert_same_as_duckdb(con, clickhouse_rows(clickhouse, table), table, f"marts.{mart}")
    con.close()
    assert counts["fct_orders"] > 0 and counts["fct_deliveries"] > 0, counts


PROBE = pa.schema(
    [
        pa.field("order_id", pa.int64(), nullable=False),
        pa.field("total_amount", pa.decimal128(12, 2)),
        pa.field("created_at", pa.timestamp("us")),
        pa.field("revenue_date", pa.date32()),
        pa.field("share", pa.float64()),
        pa.field("on_time", pa.bool_()),
        pa.field("region", pa.string()),
        pa.field("minutes", pa.int32()),
    ]
)


def _probe_rows(ids: range, amount: str = "123456789.99", micros: int = 123456) -> pa.Table:
    n = len(ids)
    return pa.Table.from_pydict(
        {
            "order_id": list(ids),
            "total_amount": [Decimal(amount)] * n,
            "created_at": [datetime(2026, 11, 1, 8, 0, 0, micros)] * n,
            "revenue_date": [date(2026, 11, 1)] * n,
            "share": [0.1] * n,
            "on_time": [True] * n,
            "region": ["são paulo", None, "north"][:n],
            "minutes": [None] * n,
        },
        schema=PROBE,
    )


def test_clickhouse_reads_main_not_the_audit_branch_and_a_different_table_fails(
    settings: Settings, clickhouse: ClickHouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog: SqlCatalog = load_catalog(settings)
    probe = catalog.create_table(("marts", "probe"), schema=PROBE)
    probe.append(_probe_rows(range(1, 4)))
    main = probe.metadata.refs["main"].snapshot_id
    # As a publish does: a newer snapshot on the branch audit, main where it was.
    probe.manage_snapshots().create_branch(main, "audit").commit()
    probe.append(_probe_rows(range(4, 6)), branch="audit")
    probe = catalog.load_table(("marts", "probe"))
    audit = probe.metadata.refs["audit"].snapshot_id
    assert probe.metadata.current_snapshot_id == main != audit
    # The same rows but one cent and one microsecond off.
    other = catalog.create_table(("marts", "other"), schema=PROBE)
    other.append(_probe_rows(range(1, 4), amount="123456789.98", micros=123457))
    _inside(monkeypatch, settings.warehouse)
    con = duck.connect()

    assert assert_same_as_duckdb(con, clickhouse_rows(clickhouse, probe), probe, "probe on main") == 3
    with pytest.raises(AssertionError, match="rows only ClickHouse read"):
        assert_same_as_duckdb(con, clickhouse_rows(clickhouse, probe, snapshot_id=audit), probe, "probe's audit head")
    with pytest.raises(AssertionError, match="rows only ClickHouse read"):
        assert_same_as_duckdb(con, clickhouse_rows(clickhouse, other), probe, "a table a cent and a microsecond off")
    con.close()
