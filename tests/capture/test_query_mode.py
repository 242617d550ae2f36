"""Query-based capture (`capture --mode query`): what it lands, and what it cannot see."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import psycopg2
import pytest

from logistics_platform.lib.capture.query_mode import plan_table
from logistics_platform.lib.capture.runner import run_capture
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.settings import local_settings
from tests.capture.support import identities, landed_events, replay, table_rows


def _exec(conn: psycopg2.extensions.connection, sql: str, *params: object) -> None:
    with conn.cursor() as cur:
        cur.execute(sql, params)
    conn.commit()


@pytest.mark.postgres
def test_query_mode_lands_changes_and_documents_its_blind_spots(oltp_dsn: str, tmp_path: Path) -> None:
    settings = local_settings(tmp_path, oltp_dsn=oltp_dsn, capture_slot="cap_q", capture_query_overlap_seconds=60)
    conn = psycopg2.connect(oltp_dsn)
    simulate(conn, 400, seed=21)
    with conn.cursor() as cur:
        cur.execute("select order_id from orders where status = 'delivered' order by order_id limit 3")
        deleted, twice, skewed = (r[0] for r in cur.fetchall())
    conn.commit()
    # An old row (last changed an hour ago), so that the skewed versions below are still its newest.
    _exec(conn, "update orders set updated_at = now() - interval '1 hour' where order_id = %s", skewed)
    first = run_capture(settings, mode="query")
    assert first.changes > 0
    events = landed_events(settings.landing_dir)
    assert {e["op"] for _t, e in events} == {"r"}
    for table, columns in TABLES.items():  # a first poll is a full copy
        assert replay(events, table, KEYS[table]) == table_rows(conn, table, columns, KEYS[table])

    # Nothing changed: the overlap window re-reads recent rows, and they are deduplicated.
    assert run_capture(settings, mode="query").changes == 0

    # Blind spot 1, hard deletes: the row is gone, so no poll returns it.
    _exec(conn, "delete from orders where order_id = %s", deleted)
    # Blind spot 2, intermediate states: two changes between polls, only the last is seen.
    _exec(conn, "update orders set region = 'north', updated_at = clock_timestamp() where order_id = %s", twice)
    _exec(conn, "update orders set region = 'south', updated_at = clock_timestamp() where order_id = %s", twice)
    # Inside the overlap window, a writer whose clock is 30 s behind is still caught.
    _exec(
        conn,
        "update orders set region = 'east', updated_at = now() - interval '30 seconds' where order_id = %s",
        skewed,
    )
    second = run_capture(settings, mode="query")
    events = landed_events(settings.landing_dir)
    orders = replay(events, "orders", "order_id")
    assert deleted in orders  # still there downstream
    per_key = Counter(k for t, k, _lsn, _op in identities(events) if t == "oltp.public.orders")
    assert per_key[twice] == 2 and orders[twice]["region"] == "south"  # snapshot + the last version only
    assert orders[skewed]["region"] == "east"
    assert second.changes == 2

    # Blind spot 3, clock skew (or a long transaction) beyond the overlap: that version is never read.
    _exec(
        conn,
        "update orders set region = 'west', updated_at = now() - interval '10 minutes' where order_id = %s",
        skewed,
    )
    assert run_capture(settings, mode="query").changes == 0
    orders = replay(landed_events(settings.landing_dir), "orders", "order_id")
    assert orders[skewed]["region"] == "east"
    conn.close()


def test_plan_table_deduplicates_the_overlap_and_picks_ops() -> None:
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 11, 2, 10, tzinfo=UTC)
    row = {"order_id": 1, "created_at": t0, "updated_at": t0}
    planned, state = plan_table("orders", [row], None, overlap_us=60_000_000)
    assert [op for op, _r, _v in planned] == ["r"] and state["watermark_us"] is not None
    planned, state2 = plan_table("orders", [row], state, overlap_us=60_000_000)
    assert planned == [] and state2 == state
    later = {"order_id": 1, "created_at": t0, "updated_at": t0 + timedelta(seconds=5)}
    new = {"order_id": 2, "created_at": t0 + timedelta(seconds=6), "updated_at": t0 + timedelta(seconds=6)}
    planned, state3 = plan_table("orders", [row, later, new], state2, overlap_us=60_000_000)
    assert [(op, r["order_id"]) for op, r, _v in planned] == [("u", 1), ("c", 2)]
    assert len(state3["seen"]) == 3  # all within the overlap of the new watermark
