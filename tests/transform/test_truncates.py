"""Debezium's TRUNCATE (op t) through dbt: the current-state models and marts drop the rows whose last change precedes
it, int_truncates lists it, and arrival hours processed shuffled and re-run equal a full refresh."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import hour_dir, list_arrival_hours
from logistics_platform.lib.bronze.schema import TOPICS
from logistics_platform.lib.transform.project import MART_MODELS, run_dbt, window_vars
from logistics_platform.settings import local_settings
from tests.e2e.test_incremental import NO_TESTS, OPERATIONS_MARTS, _compare
from tests.support.bronze import write_file

pytestmark = pytest.mark.slow
CURRENT = ("int_orders_current", "int_payments_current", "int_couriers_current", "int_tenant_versions")
_LSN = re.compile(rb'"ts_ms":(\d+),"snapshot":"false".*?"lsn":(\d+)')


def _truncate(table: str, lsn: int, ts_ms: int) -> bytes:
    source = {"version": "3.6.3.Final", "connector": "postgresql", "name": "oltp", "ts_ms": ts_ms, "snapshot": "false"}
    source |= {"db": "oltp", "sequence": None, "schema": "public", "table": table, "txId": 9, "lsn": lsn, "xmin": None}
    return json.dumps({"before": None, "after": None, "source": source, "op": "t", "ts_ms": ts_ms + 5}).encode()


def _middle_change(landing: Path, hour: datetime) -> tuple[int, int]:
    """(lsn, ts_ms) of the middle streamed change of orders landed in ``hour``."""
    found = []
    for path in sorted((landing / hour_dir(TOPICS["orders"].topic, hour)).glob("*.json*")):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        found += [(int(lsn), int(ts)) for ts, lsn in _LSN.findall(data)]
    assert len(found) > 20
    return sorted(found)[len(found) // 2]


def test_truncates_drop_earlier_rows_and_shuffled_hours_equal_full_refresh(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "world")
    config = GeneratorConfig(start=datetime(2026, 11, 1), hours=5, seed=11, orders_per_day=1200, pings_per_day=2000)
    generate(settings.landing_dir, replace(config, avro_file_rate=0.0, out_of_order_rate=0.05, invalid_op_rate=0.0))
    hours = list_arrival_hours(settings.landing_dir)
    # TRUNCATE orders, payments (one statement: one event per table) in hour 2, landed again in hour 4 (a redelivery);
    # couriers truncated in hour 3. Changes before them land in hours both before and after.
    lsn, ts_ms = _middle_change(settings.landing_dir, hours[2])
    c_lsn, c_ts = _middle_change(settings.landing_dir, hours[3])
    for table, at, tlsn, tts in (
        ("orders", 2, lsn, ts_ms),
        ("payments", 2, lsn + 1, ts_ms),
        ("couriers", 3, c_lsn + 1, c_ts),
        ("orders", 4, lsn, ts_ms),
    ):
        write_file(settings.landing_dir, TOPICS[table].topic, hours[at], 7, 900_000 + at, [_truncate(table, tlsn, tts)])

    steps = [(3, 3), (0, 1), (4, 4), (2, 2), (3, 3), (2, 2)]
    target = tmp_path / "target"
    for first, last in steps:
        for hour in hours[first : last + 1]:
            report = ingest_hour(settings, hour)
            assert "invalid_op" not in {r for t in report.topics.values() for r in t.quarantined_by_reason}
        run_dbt(settings, ["build", *NO_TESTS], window=window_vars(hours[first], hours[last]), target_path=target)

    rebuilt = settings.with_overrides(duckdb_path=tmp_path / "rebuilt.duckdb")
    result = run_dbt(rebuilt, ["build", "--full-refresh"], target_path=tmp_path / "target_full")
    failed = [r["unique_id"] for r in result.results if r["status"] in ("fail", "error")]
    assert result.ok and not failed, failed
    relations = [f"marts.{m}" for m in (*MART_MODELS, *OPERATIONS_MARTS)]
    relations += [f"intermediate.{m}" for m in (*CURRENT, "int_truncates")]
    counts = _compare(settings.duckdb_path, rebuilt.duckdb_path, relations)

    con = duck.connect(rebuilt.duckdb_path, read_only=True)
    try:
        truncates = con.sql("select table_name, truncate_lsn from intermediate.int_truncates order by 1").fetchall()
        assert truncates == [("couriers", c_lsn + 1), ("orders", lsn), ("payments", lsn + 1)]
        for table, key, tlsn in (("orders", "order_id", lsn), ("payments", "payment_id", lsn + 1)):
            # Independently: the keys whose last change (by lsn, any arrival order) is after the truncate and no delete.
            expected = con.sql(
                f"select {key} from staging.stg_{table}"
                f" qualify row_number() over (partition by {key} order by _lsn desc) = 1"
                f" and _lsn > {tlsn} and _op != 'd'"
            ).fetchall()
            ended = con.sql(f"select count(distinct {key}) from staging.stg_{table} where _lsn < {tlsn}").fetchone()[0]
            current = con.sql(f"select {key} from intermediate.int_{table}_current where not is_deleted").fetchall()
            assert sorted(current) == sorted(expected) and len(expected) > 10 and ended > 10
        fct = con.sql("select order_id from marts.fct_orders").fetchall()
        assert sorted(fct) == sorted(
            con.sql("select order_id from intermediate.int_orders_current where not is_deleted").fetchall()
        )
        assert con.sql(f"select count(*) from intermediate.int_orders_current where last_lsn < {lsn}").fetchone() == (
            0,
        )
        # fct_region_sla's last window counts the open overdue orders of now: not those the truncate ended.
        width = f"interval {settings.sla_window_minutes} minute"
        last = f"(select max(window_start) + {width} from marts.fct_region_sla)"
        overdue = con.sql(f"select sum(overdue_open) from marts.fct_region_sla where window_start + {width} = {last}")
        assert (
            overdue.fetchone()
            == con.sql(
                "select count(*) from intermediate.int_orders_current where not is_deleted"
                f" and status not in ('delivered', 'cancelled') and promised_at < {last}"
            ).fetchone()
        )
        # Couriers: dim_courier holds only the couriers changed after their truncate.
        dim = con.sql("select count(*) from marts.dim_courier").fetchone()[0]
        assert (
            dim
            == con.sql(
                "select count(*) from intermediate.int_couriers_current"
                f" where last_lsn > {c_lsn + 1} and not is_deleted"
            ).fetchone()[0]
        )
    finally:
        con.close()
    assert counts["marts.fct_orders"] > 0 and counts["intermediate.int_truncates"] == 3
