"""Pure parts of capture: the pgoutput decoder, envelopes as bronze parses them, lag decisions, one-line errors."""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import psycopg2
import pytest

from logistics_platform.lib.bronze.envelope import TOMBSTONE, LineParser, Rejected
from logistics_platform.lib.bronze.schema import TOPICS
from logistics_platform.lib.capture import pgoutput as pg
from logistics_platform.lib.capture.envelope import (
    UNAVAILABLE_VALUE,
    change_event,
    from_text,
    lines_of,
    row_from_tuple,
    to_json_value,
)
from logistics_platform.lib.capture.replication import capture_logical, snapshot_flags
from logistics_platform.lib.capture.schema import TABLES
from logistics_platform.lib.capture.slot import (
    CaptureError,
    Lag,
    SlotInfo,
    check_slot,
    int_to_lsn,
    lag_from,
    lag_problems,
    lsn_to_int,
    released_slot_info,
    retention_alert,
)


def _s(text: str) -> bytes:
    return text.encode() + b"\0"


def _tuple(*values: str | None) -> bytes:
    out = struct.pack("!h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        elif v == "<toast>":
            out += b"u"
        else:
            raw = v.encode()
            out += b"t" + struct.pack("!i", len(raw)) + raw
    return out


def test_decodes_a_transaction_of_pgoutput_messages() -> None:
    begin = pg.decode(b"B" + struct.pack("!QqI", 0x16B374D848, 1_000_000, 742))
    assert begin == pg.Begin(0x16B374D848, pg.PG_EPOCH_UNIX_US + 1_000_000, 742)
    rel = pg.decode(
        b"R"
        + struct.pack("!I", 16385)
        + _s("public")
        + _s("tenants")
        + b"d"
        + struct.pack("!h", 2)
        + b"\x01"
        + _s("tenant_id")
        + struct.pack("!Ii", 25, -1)
        + b"\x00"
        + _s("tier")
        + struct.pack("!Ii", 25, -1)
    )
    assert isinstance(rel, pg.Relation) and rel.name == "tenants"
    assert [(c.name, c.is_key) for c in rel.columns] == [("tenant_id", True), ("tier", False)]
    ins = pg.decode(b"I" + struct.pack("!I", 16385) + b"N" + _tuple("t001", "gold"))
    assert ins == pg.Insert(16385, ("t001", "gold"))
    upd = pg.decode(b"U" + struct.pack("!I", 16385) + b"K" + _tuple("t000", None) + b"N" + _tuple("t001", None))
    assert upd == pg.Update(16385, ("t001", None), ("t000", None), True)
    dele = pg.decode(b"D" + struct.pack("!I", 16385) + b"K" + _tuple("t001", None))
    assert dele == pg.Delete(16385, ("t001", None), True)
    toast = pg.decode(b"U" + struct.pack("!I", 1) + b"N" + _tuple("k", "<toast>"))
    assert isinstance(toast, pg.Update) and toast.new[1] is pg.UNCHANGED_TOAST
    commit = pg.decode(b"C" + b"\0" + struct.pack("!QQq", 10, 20, 5))
    assert commit == pg.Commit(10, 20, pg.PG_EPOCH_UNIX_US + 5)
    assert pg.decode(b"T" + struct.pack("!ib", 1, 0) + struct.pack("!I", 16385)) == pg.Truncate((16385,))
    assert pg.decode(b"O" + struct.pack("!Q", 1) + _s("origin")) == pg.Other("O")


def test_decoder_rejects_damaged_messages() -> None:
    with pytest.raises(pg.DecodeError, match="ends at byte"):
        pg.decode(b"B" + b"\0\0")
    with pytest.raises(pg.DecodeError, match="unknown pgoutput message"):
        pg.decode(b"Z")
    with pytest.raises(pg.DecodeError, match="runs past the end"):
        pg.decode(b"I" + struct.pack("!I", 1) + b"N" + struct.pack("!h", 1) + b"t" + struct.pack("!i", 99) + b"ab")
    with pytest.raises(pg.DecodeError, match="empty"):
        pg.decode(b"")


def test_text_values_become_typed_and_unchanged_toast_becomes_the_placeholder() -> None:
    assert from_text(20, "42") == 42 and from_text(1700, "129.90") == Decimal("129.90")
    assert from_text(16, "t") is True and from_text(16, "f") is False
    assert from_text(1184, "2026-11-02 10:15:30.5+00") == "2026-11-02T10:15:30.500000Z"
    assert from_text(1184, "2026-11-02 10:15:30+00") == "2026-11-02T10:15:30.000000Z"
    assert from_text(1184, "2026-11-02 12:15:30+02") == datetime(2026, 11, 2, 10, 15, 30, tzinfo=UTC)
    assert to_json_value(from_text(1184, "2026-11-02 12:15:30+02")) == "2026-11-02T10:15:30.000000Z"
    assert from_text(25, None) is None
    # As the real connector writes it (docs/contract/sources.md, "Unchanged TOASTed columns").
    assert row_from_tuple(["k", "v"], [25, 25], ["a", pg.UNCHANGED_TOAST]) == {"k": "a", "v": UNAVAILABLE_VALUE}
    assert UNAVAILABLE_VALUE == "__debezium_unavailable_value"


def _order_row() -> dict[str, object]:
    t = datetime(2026, 11, 2, 10, 15, 30, 123456, tzinfo=UTC)
    return {
        "order_id": 7,
        "tenant_id": "t001",
        "courier_id": None,
        "region": "north",
        "status": "created",
        "total_amount": Decimal("129.90"),
        "delivery_fee": Decimal("5.00"),
        "created_at": t,
        "promised_at": t,
        "delivered_at": None,
        "updated_at": t,
    }


def test_envelopes_are_what_bronze_parses() -> None:
    parser = LineParser(TOPICS["orders"], datetime(2026, 11, 2, 10), 7200)
    row = _order_row()
    line = change_event(
        "orders",
        "c",
        None,
        row,
        lsn=900,
        sequence_lsn=850,
        commit_us=1_793_614_530_123_456,
        tx_id=77,
        processed_us=1_793_614_531_000_000,
        db="x",
    )
    source = json.loads(line)["source"]
    assert source["sequence"] == '["850","900"]' and source["ts_ms"] == 1_793_614_530_123
    assert source["ts_us"] == 1_793_614_530_123_456 and source["ts_ns"] == 1_793_614_530_123_456_000
    parsed = parser.parse(line.encode(), 0, 0, "f.json")
    assert not isinstance(parsed, Rejected) and parsed is not TOMBSTONE
    out = parser.row_dict(parsed)  # type: ignore[arg-type]
    assert out["order_id"] == 7 and out["total_amount"] == Decimal("129.90") and out["_lsn"] == 900
    assert out["_tx_id"] == 77 and out["_op"] == "c" and out["courier_id"] is None
    delete = change_event(
        "orders", "d", {"order_id": 7}, None, lsn=901, sequence_lsn=None, commit_us=1, tx_id=78, processed_us=1, db="x"
    )
    first, tomb = lines_of("orders", "d", delete)
    assert parser.row_dict(parser.parse(first.encode(), 0, 1, "f.json"))["_op"] == "d"  # type: ignore[arg-type]
    assert parser.parse(tomb.encode(), 0, 2, "f.json") is TOMBSTONE
    assert set(TABLES["orders"]) == {c.name for c in TOPICS["orders"].columns}


def test_lag_decisions() -> None:
    info = SlotInfo("s", "pgoutput", False, "reserved", 1, 1, lag_bytes=5000, retained_bytes=9000)
    lag = lag_from(info, "s", last_commit_ms=1_000, now_ms=61_000)
    assert lag.seconds_behind == 60.0
    assert lag_problems(lag, warn_bytes=10_000, warn_seconds=120) == []
    assert len(lag_problems(lag, warn_bytes=1_000, warn_seconds=30)) == 2
    assert "inactive and retains 9,000 bytes" in (retention_alert(lag, 8_000) or "")
    assert retention_alert(lag, 10_000) is None
    active = lag_from(SlotInfo("s", "pgoutput", True, "reserved", 1, 1, 0, 9000), "s", 1_000, 61_000)
    assert retention_alert(active, 8_000) is None and active.seconds_behind == 0.0
    assert "does not exist" in lag_problems(Lag("s", exists=False), 1, 1)[0]


def test_slot_states_fail_with_one_line() -> None:
    assert lsn_to_int("16/B374D848") == 0x16B374D848 and int_to_lsn(0x16B374D848) == "16/B374D848"
    check_slot(None, "s", 0)  # new: created on first use
    with pytest.raises(CaptureError, match=r"slot s is missing .* --resnapshot"):
        check_slot(None, "s", 123)
    lost = SlotInfo("s", "pgoutput", False, "lost", None, None, None, None)
    with pytest.raises(CaptureError, match="invalidated"):
        check_slot(lost, "s", 123)
    ok = SlotInfo("s", "pgoutput", False, "reserved", 1, 1, 0, 0)
    with pytest.raises(CaptureError, match="no landing manifest"):
        check_slot(ok, "s", 0)
    check_slot(ok, "s", 123)


@pytest.mark.postgres
def test_a_server_without_logical_wal_is_refused_in_one_line(tmp_path: Path) -> None:
    # The shared local server runs with wal_level=replica.
    conn = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres")
    with conn.cursor() as cur:
        cur.execute("show wal_level")
        level = cur.fetchone()[0]
    conn.close()
    if level == "logical":
        pytest.skip("the local server already decodes logical WAL")
    with pytest.raises(CaptureError, match=r"wal_level=replica; set wal_level = logical") as err:
        capture_logical("host=127.0.0.1 port=5432 user=postgres dbname=postgres", tmp_path, "s", "p")
    assert "\n" not in str(err.value)


@pytest.mark.postgres
def test_a_role_without_replication_is_refused_in_one_line(oltp_dsn: str, tmp_path: Path) -> None:
    admin = psycopg2.connect(oltp_dsn)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute("drop role if exists plain_user")
        cur.execute("create role plain_user login")
    try:
        dsn = oltp_dsn.replace("user=postgres", "user=plain_user")
        with pytest.raises(CaptureError, match="role plain_user lacks the REPLICATION privilege"):
            capture_logical(dsn, tmp_path, "s", "p")
    finally:
        with admin.cursor() as cur:
            cur.execute("drop role plain_user")
        admin.close()


@pytest.mark.postgres
def test_a_dropped_slot_is_refused_then_resnapshot_recovers(oltp_dsn: str, tmp_path: Path) -> None:
    from logistics_platform.lib.capture.simulate import simulate

    conn = psycopg2.connect(oltp_dsn)
    simulate(conn, 50, seed=3)
    first = capture_logical(oltp_dsn, tmp_path, "cap_drop", "cap_drop")
    assert first.created_slot
    conn.autocommit = True
    released_slot_info(conn, "cap_drop")  # the capture's walsender lets go of the slot just after it exits
    with conn.cursor() as cur:
        cur.execute("select pg_drop_replication_slot('cap_drop')")
    with pytest.raises(CaptureError, match="slot cap_drop is missing but the landing manifest records") as err:
        capture_logical(oltp_dsn, tmp_path, "cap_drop", "cap_drop")
    assert "\n" not in str(err.value)
    again = capture_logical(oltp_dsn, tmp_path, "cap_drop", "cap_drop", resnapshot=True)
    assert again.created_slot and again.snapshot_rows == first.snapshot_rows
    conn.close()


@pytest.mark.postgres
def test_an_invalidated_slot_is_refused_in_one_line(oltp_dsn: str, tmp_path: Path) -> None:
    from logistics_platform.lib.capture.simulate import simulate

    conn = psycopg2.connect(oltp_dsn)
    simulate(conn, 20, seed=3)
    capture_logical(oltp_dsn, tmp_path, "cap_lost", "cap_lost")
    conn.autocommit = True
    with conn.cursor() as cur:
        # Let the server drop WAL this slot still needs: a tiny max_slot_wal_keep_size, then a few segments.
        cur.execute("alter system set max_slot_wal_keep_size = '1MB'")
        cur.execute("select pg_reload_conf()")
        try:
            for _ in range(4):
                cur.execute("update tenants set updated_at = clock_timestamp()")
                cur.execute("select pg_switch_wal()")
            cur.execute("checkpoint")
            cur.execute("select wal_status from pg_replication_slots where slot_name = 'cap_lost'")
            assert cur.fetchone()[0] == "lost"
        finally:
            cur.execute("alter system reset max_slot_wal_keep_size")
            cur.execute("select pg_reload_conf()")
    with pytest.raises(CaptureError, match="slot cap_lost was invalidated") as err:
        capture_logical(oltp_dsn, tmp_path, "cap_lost", "cap_lost")
    assert "\n" not in str(err.value)
    conn.close()


def test_snapshot_flags_are_debezium_s() -> None:
    """As the real connector flags its snapshot rows (tests/debezium/test_capture_vs_connector.py compares them)."""
    first_in, last_in = "first_in_data_collection", "last_in_data_collection"
    assert snapshot_flags([3, 0, 0, 2]) == [["first", "true", last_in], [], [], [first_in, "last"]]
    assert snapshot_flags([0, 2, 1, 3, 0]) == [[], ["first", last_in], [first_in], [first_in, "true", "last"], []]
    assert snapshot_flags([1]) == [["last"]] and snapshot_flags([0, 0]) == [[], []]
