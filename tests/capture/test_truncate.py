"""A TRUNCATE captured by `logistics-platform capture`: one op t event per table, as the real connector sends with
skipped.operations=none, and the current-state marts follow the OLTP tables through it."""

from __future__ import annotations

from pathlib import Path

import psycopg2
import pytest

from logistics_platform.cli.render import render_summary
from logistics_platform.lib.capture.runner import run_capture
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.lib.connections import connect
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import local_settings
from tests.capture.support import fct_orders_equals_oltp, landed_events

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_a_truncate_lands_as_op_t_and_the_marts_follow_it(
    oltp_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    settings = local_settings(tmp_path, oltp_dsn=oltp_dsn, capture_slot="cap_trunc", capture_publication="cap_trunc")
    conn = psycopg2.connect(oltp_dsn)
    simulate(conn, 0, seed=1)
    run_capture(settings)
    simulate(conn, 300, seed=2)
    with conn.cursor() as cur:
        cur.execute("truncate payments, orders")
    conn.commit()
    simulate(conn, 150, seed=3)  # order and payment ids start again at 1
    run_capture(settings)

    truncates = [(topic, e) for topic, e in landed_events(settings.landing_dir) if e["op"] == "t"]
    assert sorted(topic for topic, _ in truncates) == ["oltp.public.orders", "oltp.public.payments"]
    assert all(e["before"] is None and e["after"] is None for _, e in truncates)
    assert len({(e["source"]["lsn"], e["source"]["txId"]) for _, e in truncates}) == 1  # one statement, one message

    summary = run_pipeline(settings.with_overrides(oltp_dsn=None))
    assert summary.ok, render_summary(summary)
    assert summary.bronze.get("quarantine", 0) == 0
    assert fct_orders_equals_oltp(settings, conn) > 20
    with conn.cursor() as cur:
        cur.execute("select payment_id, status from payments order by 1")
        expected = cur.fetchall()
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        got = duck.execute(
            "select payment_id, status from intermediate.int_payments_current where not is_deleted order by 1"
        ).fetchall()
        history = duck.execute("select table_name from intermediate.int_truncates order by 1").fetchall()
    finally:
        duck.close()
    conn.close()
    assert got == expected and history == [("orders",), ("payments",)]
