"""ClickHouse's own engine (chdb, embedded) reads the published Iceberg marts with its ``icebergLocal`` table function.

Every mart of the session's ``embedded_run`` equals, row for row and column for column, DuckDB's ``iceberg_scan`` of
the same table: two engines that share no reader code (tests/support/clickhouse.py). ClickHouse reads ``main``, the
branch readers see, not the newer snapshot a publish first writes on the branch ``audit``; and a table one cent and
one microsecond off fails the comparison, read in a session time zone away from UTC.
tests/dashboard/test_clickhouse_reads.py does the same on the dashboard's world, where every mart has rows.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog

from logistics_platform.lib import connections as duck
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.settings import Settings
from tests.conftest import EmbeddedRun
from tests.support.clickhouse import (
    assert_same_as_duckdb,
    clickhouse_rows,
    compare_published_marts,
    embedded_clickhouse,
    run_inside,
)

pytestmark = pytest.mark.slow


def test_clickhouse_reads_every_published_mart_as_duckdb_does(
    embedded_run: EmbeddedRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert embedded_run.summary.ok
    run_inside(monkeypatch, embedded_run.settings)
    with embedded_clickhouse() as clickhouse:
        counts = compare_published_marts(embedded_run.settings, clickhouse)
    assert set(counts) == set(MART_MODELS)
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
    settings: Settings, monkeypatch: pytest.MonkeyPatch
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
    other = catalog.create_table(("marts", "other"), schema=PROBE)
    other.append(_probe_rows(range(1, 4), amount="123456789.98", micros=123457))
    run_inside(monkeypatch, settings)
    con = duck.connect()
    # Away from UTC: ClickHouse labels the timestamps with this zone, the microseconds it read stay the stored ones.
    with embedded_clickhouse(session_timezone="America/Sao_Paulo") as ch:
        assert assert_same_as_duckdb(con, clickhouse_rows(ch, probe), probe, "probe on main") == 3
        with pytest.raises(AssertionError, match="rows only ClickHouse read"):
            assert_same_as_duckdb(con, clickhouse_rows(ch, probe, snapshot_id=audit), probe, "probe's audit head")
        with pytest.raises(AssertionError, match="rows only ClickHouse read"):
            assert_same_as_duckdb(con, clickhouse_rows(ch, other), probe, "a table a cent and a microsecond off")
    con.close()
