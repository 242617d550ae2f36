"""Logical-replication capture against a real PostgreSQL with wal_level=logical, through the whole pipeline."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import dagster as dg
import psycopg2
import pytest

from logistics_platform.cli import main
from logistics_platform.cli.render import render_summary
from logistics_platform.defs.capture import build_defs
from logistics_platform.defs.capture.assets import CAPTURE_KEY, oltp_changes
from logistics_platform.lib.bronze.reports import PROP_MODE
from logistics_platform.lib.capture.runner import run_capture
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.contract import ORDER_COORDINATES
from logistics_platform.lib.timekeys import hour_start
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import Settings, local_settings
from tests.capture.support import (
    coordinates_equal_oltp,
    fct_orders_equals_oltp,
    identities,
    landed_events,
    naive_utc,
    replay,
    table_rows,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _settings(tmp_path: Path, dsn: str) -> Settings:
    return local_settings(tmp_path, oltp_dsn=dsn, capture_slot="cap_e2e", capture_publication="cap_e2e")


def test_capture_then_pipeline_equals_the_oltp_database(
    oltp_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    settings = _settings(tmp_path, oltp_dsn)
    conn = psycopg2.connect(oltp_dsn)
    # The slot starts when tenants and couriers exist but no order yet (as the generator's data does), so that the
    # orders' whole history streams; test_existing_database.py starts one on a database with history.
    simulate(conn, 0, seed=1)
    # Real time: capture lands in the hour in progress, which `run` ingests like any other.
    first = run_capture(settings)  # creates publication and slot, lands the snapshot as op r
    assert first.created_slot and first.snapshot_rows == 28

    # The orders gain their coordinates half way (ALTER TABLE under the running slot): older rows keep them null.
    stream = simulate(conn, 3000, seed=2, coordinates_after=1500)
    assert {"order_delete", "courier_delete", "tenant_tier", "payment_refunded"} <= set(stream.by_kind)
    run_capture(settings)
    simulate(conn, 500, seed=3)
    # A tier history we know: t001 changes tier twice, in two transactions.
    with conn.cursor() as cur:
        cur.execute("select tier from tenants where tenant_id = 't001'")
        start_tier = cur.fetchone()[0]
        history = [start_tier]
        time.sleep(0.005)
        for tier in [t for t in ("bronze", "silver", "gold") if t != start_tier]:
            cur.execute(
                "update tenants set tier = %s, updated_at = clock_timestamp() where tenant_id = 't001'", (tier,)
            )
            conn.commit()
            history.append(tier)
            # Event time is source.ts_ms, in milliseconds: two versions in one millisecond would share valid_from.
            time.sleep(0.005)
    second = run_capture(settings)
    assert second.transactions > 0 and not second.created_slot

    events = landed_events(settings.landing_dir)
    ids = identities(events)
    assert len(ids) == len(set(ids)), "an event landed twice"
    for table, columns in TABLES.items():  # the landed events replay to exactly the OLTP tables
        columns += ORDER_COORDINATES if table == "orders" else ()  # a change before the ALTER TABLE lacks them
        replayed = {k: {c: row.get(c) for c in columns} for k, row in replay(events, table, KEYS[table]).items()}
        assert replayed == table_rows(conn, table, columns, KEYS[table]), table

    summary = run_pipeline(settings.with_overrides(oltp_dsn=None))
    assert summary.ok, render_summary(summary)
    assert summary.bronze.get("quarantine", 0) == 0

    cols = TABLES["orders"]
    with conn.cursor() as cur:
        cur.execute(f"select {', '.join(cols)} from orders order by order_id")
        expected = [tuple(naive_utc(v) for v in r) for r in cur.fetchall()]
        cur.execute("select count(*) from orders where status = 'cancelled'")
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        got = duck.execute(f"select {', '.join(cols)} from marts.fct_orders order by order_id").fetchall()
        versions = duck.execute(
            "select tier, valid_from, valid_to, is_current from marts.dim_tenant where tenant_id = 't001' "
            "order by valid_from"
        ).fetchall()
        current = dict(duck.execute("select tenant_id, tier from marts.dim_tenant where is_current").fetchall())
    finally:
        duck.close()
    got = [tuple(naive_utc(Decimal(str(v)) if isinstance(v, float) else v) for v in r) for r in got]
    assert len(got) == len(expected) > 500
    assert got == expected
    with_xy, without = coordinates_equal_oltp(settings, conn)
    assert with_xy > 50 and without > 50
    # dim_tenant holds the tier history: t001's last versions are the ones we made, chained without gaps.
    assert [v[0] for v in versions[-len(history) :]] == history
    assert all(a[2] == b[1] for a, b in itertools.pairwise(versions))
    assert versions[-1][2] is None and versions[-1][3] is True
    with conn.cursor() as cur:
        cur.execute("select tenant_id, tier from tenants")
        assert current == dict(cur.fetchall())
    conn.close()


def test_simulate_capture_run_in_real_time_twice_into_the_open_hour(
    oltp_dsn: str,
    tmp_path: Path,
    cli_env: Callable[[Settings], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`oltp-simulate` -> `capture` -> `run` as a user runs them, then again: both captures land in the hour in
    progress, the second `run` appends the second capture's files to it, and marts.fct_orders equals the OLTP table
    after each run."""
    settings = local_settings(tmp_path, oltp_dsn=oltp_dsn, capture_slot="cap_live", capture_publication="cap_live")
    cli_env(settings)
    monkeypatch.setenv("CAPTURE_SLOT", "cap_live")
    monkeypatch.setenv("CAPTURE_PUBLICATION", "cap_live")

    def simulate_and_capture(changes: int, seed: int, *more: str) -> None:
        monkeypatch.setenv("OLTP_DSN", oltp_dsn)
        assert main(["oltp-simulate", "--changes", str(changes), "--seed", str(seed), *more]) == 0
        assert main(["capture"]) == 0
        monkeypatch.delenv("OLTP_DSN")  # `run` of the landed files, as test_capture_then_pipeline_... does

    conn = psycopg2.connect(oltp_dsn)
    simulate_and_capture(0, 1)  # tenants and couriers first: the slot starts before any order (see above)
    simulate_and_capture(1500, 2)
    first_hour = hour_start(datetime.now(UTC))
    assert main(["run"]) == 0, capsys.readouterr().out
    first = fct_orders_equals_oltp(settings, conn)

    assert coordinates_equal_oltp(settings, conn)[0] == 0
    simulate_and_capture(400, 3, "--coordinates-after", "200")  # the orders gain coordinates between two captures
    assert main(["run"]) == 0, capsys.readouterr().out
    assert fct_orders_equals_oltp(settings, conn) > first
    assert coordinates_equal_oltp(settings, conn)[0] > 10
    conn.close()
    orders = load_catalog(settings).load_table("bronze.orders")
    modes = [s.summary.additional_properties.get(PROP_MODE) for s in orders.snapshots()]
    if hour_start(datetime.now(UTC)) == first_hour:
        # Both captures landed in one hour: the first run read it whole (a new hour), the second only the files of
        # the second capture (no landed file changed in between).
        assert modes == ["replace", "append"], modes


def test_capture_asset_lands_the_snapshot_and_reports_lag(oltp_dsn: str, tmp_path: Path) -> None:
    settings = _settings(tmp_path, oltp_dsn)
    conn = psycopg2.connect(oltp_dsn)
    simulate(conn, 100, seed=4)
    conn.close()
    result = dg.materialize([oltp_changes], resources={"settings": settings})
    assert result.success
    meta = result.asset_materializations_for_node("capture__oltp_changes")[0].metadata
    assert meta["status"].value == "captured" and meta["snapshot_rows"].value > 20
    assert meta["slot_exists"].value is True and meta["lag_bytes"].value >= 0
    assert meta["slot_active"].value is False


def test_capture_asset_reports_not_configured_without_oltp_dsn(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    defs = build_defs(settings)
    assert CAPTURE_KEY in {a.key for a in defs.assets or []}  # type: ignore[union-attr]
    result = dg.materialize([oltp_changes], resources={"settings": settings})
    assert result.success
    meta = result.asset_materializations_for_node("capture__oltp_changes")[0].metadata
    assert meta["status"].value == "not configured"
    assert not settings.landing_dir.exists()  # nothing landed
