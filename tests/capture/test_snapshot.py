"""A new slot's exported snapshot, then the stream: no gap and no overlap, with changes committed meanwhile."""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path

import psycopg2
import pytest

from logistics_platform.lib.capture.runner import run_capture
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.settings import local_settings
from tests.capture.support import identities, landed_events, replay, table_rows

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_snapshot_then_stream_with_concurrent_changes(oltp_dsn: str, tmp_path: Path) -> None:
    slot = "cap_snap"
    settings = local_settings(tmp_path, oltp_dsn=oltp_dsn, capture_slot=slot, capture_publication=slot)
    conn = psycopg2.connect(oltp_dsn)
    simulate(conn, 1500, seed=11)

    # A transaction already writing when the slot is created: the slot's consistent point waits for it.
    open_tx = psycopg2.connect(oltp_dsn)
    with open_tx.cursor() as cur:
        cur.execute("update tenants set name = 'renamed while snapshotting', updated_at = clock_timestamp()")
    writer_conn = psycopg2.connect(oltp_dsn)
    started = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            started.set()
            simulate(writer_conn, 2500, seed=12)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    started.wait()
    threading.Timer(0.5, open_tx.commit).start()
    first = run_capture(settings)  # creates the slot and snapshots while the simulator commits
    writer.join()
    assert not errors
    rest = run_capture(settings)
    open_tx.close()
    writer_conn.close()

    assert first.created_slot and first.snapshot_rows > 0
    # Changes committed after the slot's consistent point came through the stream (in the first capture's drain or
    # the next one's, depending on how far the simulator got meanwhile).
    assert first.transactions + rest.transactions > 0
    events = landed_events(settings.landing_dir)
    ids = identities(events)
    assert len(ids) == len(set(ids))
    ops: dict[tuple[str, object], list[tuple[int, str]]] = defaultdict(list)
    for topic, key, lsn, op in ids:
        ops[(topic, key)].append((lsn, op))
    snapshot_lsns = {lsn for (_t, _k), evs in ops.items() for lsn, op in evs if op == "r"}
    assert len(snapshot_lsns) == 1
    (snap_lsn,) = snapshot_lsns
    for evs in ops.values():
        kinds = [op for _lsn, op in sorted(evs)]
        # No overlap: a row read by the snapshot is never inserted again by the stream; no gap: a row the
        # snapshot did not see begins with its insert.
        assert kinds[0] in ("r", "c") and "r" not in kinds[1:]
        assert not ("r" in kinds and "c" in kinds)
        assert all(lsn > snap_lsn for lsn, op in evs if op != "r")
    for table, columns in TABLES.items():
        assert replay(events, table, KEYS[table]) == table_rows(conn, table, columns, KEYS[table]), table
    with conn.cursor() as cur:
        cur.execute("select count(*) from tenants where name = 'renamed while snapshotting'")
        assert cur.fetchone()[0] > 0
    conn.close()
