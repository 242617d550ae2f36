"""Exactly once: a capture killed after landing a batch and before confirming it loses and duplicates nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

from logistics_platform.lib.capture.landing_writer import CAPTURE_DIR, LandingWriter, Manifest, read_manifest
from logistics_platform.lib.capture.runner import run_capture
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.simulate import simulate
from logistics_platform.lib.capture.slot import lsn_to_int
from logistics_platform.settings import local_settings
from tests.capture.support import identities, landed_events, replay, table_rows

ROOT = Path(__file__).resolve().parents[2]


def _confirmed(dsn: str, slot: str) -> int:
    conn = psycopg2.connect(dsn)
    with conn.cursor() as cur:
        cur.execute("select confirmed_flush_lsn::text from pg_replication_slots where slot_name = %s", (slot,))
        value = lsn_to_int(cur.fetchone()[0])
    conn.close()
    assert value is not None
    return value


@pytest.mark.postgres
@pytest.mark.slow
def test_kill_between_landing_and_confirming_loses_and_duplicates_nothing(oltp_dsn: str, tmp_path: Path) -> None:
    slot = "cap_crash"
    settings = local_settings(tmp_path, oltp_dsn=oltp_dsn, capture_slot=slot, capture_publication=slot)
    conn = psycopg2.connect(oltp_dsn)
    simulate(conn, 300, seed=5)
    run_capture(settings)  # slot + snapshot
    simulate(conn, 1500, seed=6)

    probe = subprocess.run(
        [sys.executable, "-m", "tests.capture.crash_probe", oltp_dsn, str(settings.landing_dir), slot],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == -9, probe.stderr  # killed at the hook, not finished
    manifest = read_manifest(settings.landing_dir, slot)
    assert manifest is not None
    # The batch is durable and recorded, the slot still at its older position: the server will resend it.
    assert _confirmed(oltp_dsn, slot) < manifest.lsn
    landed_before = landed_events(settings.landing_dir)

    again = run_capture(settings)
    assert again.skipped_transactions > 0 and again.transactions == 0 and not again.files
    assert _confirmed(oltp_dsn, slot) >= manifest.lsn
    events = landed_events(settings.landing_dir)
    assert events == landed_before
    ids = identities(events)
    assert len(ids) == len(set(ids))
    for table, columns in TABLES.items():
        assert replay(events, table, KEYS[table]) == table_rows(conn, table, columns, KEYS[table]), table

    # And the stream goes on from there.
    simulate(conn, 200, seed=8)
    more = run_capture(settings)
    assert more.transactions > 0 and more.skipped_transactions == 0
    events = landed_events(settings.landing_dir)
    for table, columns in TABLES.items():
        assert replay(events, table, KEYS[table]) == table_rows(conn, table, columns, KEYS[table]), table
    conn.close()


def test_a_crash_after_the_manifest_is_rolled_forward_on_open(tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    with LandingWriter(landing, "s") as w:
        w.commit({"oltp.public.orders": ['{"a":1}']}, __import__("datetime").datetime(2026, 11, 2, 10), lsn=100)
    # A crash between writing the manifest and the renames: the temp file exists, the manifest lists it.
    tmp = landing / CAPTURE_DIR / "tmp" / "x.json"
    tmp.write_text('{"a":2}\n')
    final = "topics/oltp.public.orders/dt=2026-11-02/hr=11/oltp.public.orders+0+0000000001.json"
    m = Manifest("s", lsn=200, offsets={"oltp.public.orders": 2}, pending=[(f"{CAPTURE_DIR}/tmp/x.json", final)])
    (landing / CAPTURE_DIR / "s.json").write_text(m.to_json())
    assert not (landing / final).exists()
    with LandingWriter(landing, "s") as w:
        assert w.manifest.lsn == 200
    assert (landing / final).read_text() == '{"a":2}\n' and not tmp.exists()
    orphan = landing / CAPTURE_DIR / "tmp" / "crashed-before-the-manifest.json"
    orphan.write_text('{"a":3}\n')
    with LandingWriter(landing, "s"):  # idempotent; a batch that never reached the manifest is dropped
        pass
    assert not orphan.exists()
    assert json.loads((landing / final).read_text()) == {"a": 2}


def test_a_second_capture_of_the_same_stream_is_refused(tmp_path: Path) -> None:
    from logistics_platform.lib.capture.landing_writer import CaptureLockedError

    with LandingWriter(tmp_path, "s"), pytest.raises(CaptureLockedError, match="already running"):
        LandingWriter(tmp_path, "s").open()
