"""Preconditions of logical capture and the state of its slot: one-line errors a user can act on."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


class CaptureError(RuntimeError):
    """Capture cannot run; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class SlotInfo:
    name: str
    plugin: str
    active: bool
    wal_status: str | None  # reserved / extended / unreserved / lost (invalidated)
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    lag_bytes: int | None  # current WAL position - confirmed position
    retained_bytes: int | None  # current WAL position - restart position: WAL the server keeps for this slot


def lsn_to_int(text: str | None) -> int | None:
    """``16/B374D848`` -> integer."""
    if text is None:
        return None
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def int_to_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def check_server(conn: Any) -> None:
    """Fail with one line unless the server decodes logical WAL and the user may replicate."""
    with conn.cursor() as cur:
        cur.execute("show wal_level")
        row = cur.fetchone()
        level = row[0] if row else "?"
        cur.execute("select rolsuper or rolreplication, current_user from pg_roles where rolname = current_user")
        priv = cur.fetchone()
    conn.commit()
    if level != "logical":
        raise CaptureError(
            f"capture: the OLTP server has wal_level={level}; set wal_level = logical in postgresql.conf and restart "
            "it, or use `logistics-platform capture --mode query`"
        )
    if not priv or not priv[0]:
        user = priv[1] if priv else "?"
        raise CaptureError(
            f"capture: role {user} lacks the REPLICATION privilege; run `ALTER ROLE {user} REPLICATION` as a "
            "superuser, or use `logistics-platform capture --mode query`"
        )


def slot_info(conn: Any, slot: str) -> SlotInfo | None:
    """The slot's state and how far behind the server it is, or None when it does not exist."""
    with conn.cursor() as cur:
        cur.execute(
            "select slot_name, plugin, active, wal_status, restart_lsn::text, confirmed_flush_lsn::text,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,"
            " pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint"
            " from pg_replication_slots where slot_name = %s",
            (slot,),
        )
        row = cur.fetchone()
    conn.commit()
    if row is None:
        return None
    return SlotInfo(row[0], row[1], bool(row[2]), row[3], lsn_to_int(row[4]), lsn_to_int(row[5]), row[6], row[7])


def released_slot_info(conn: Any, slot: str, wait_seconds: float = 5.0, poll_seconds: float = 0.05) -> SlotInfo | None:
    """:func:`slot_info` once no process holds the slot (a walsender releases it a moment after its capture exits)."""
    deadline = time.monotonic() + wait_seconds
    info = slot_info(conn, slot)
    while info is not None and info.active and time.monotonic() < deadline:
        time.sleep(poll_seconds)
        info = slot_info(conn, slot)
    return info


def check_slot(info: SlotInfo | None, slot: str, landed_lsn: int) -> None:
    """Fail with one line when the slot cannot continue what the manifest recorded."""
    fix = "re-snapshot with `logistics-platform capture --resnapshot`"
    if info is None:
        if landed_lsn:
            raise CaptureError(
                f"capture: replication slot {slot} is missing but the landing manifest records changes up to LSN "
                f"{int_to_lsn(landed_lsn)}; the WAL since is gone, so {fix}"
            )
        return
    if info.wal_status == "lost":
        raise CaptureError(
            f"capture: replication slot {slot} was invalidated (the server removed WAL it still needed, see "
            f"max_slot_wal_keep_size); {fix}"
        )
    if info.plugin != "pgoutput":
        raise CaptureError(
            f"capture: replication slot {slot} uses plugin {info.plugin}, not pgoutput; set CAPTURE_SLOT to another "
            "name or drop that slot"
        )
    if not landed_lsn:
        raise CaptureError(
            f"capture: replication slot {slot} exists but no landing manifest records its snapshot (another landing "
            f"zone, or a snapshot cut short); {fix}"
        )
    if info.active:
        raise CaptureError(f"capture: replication slot {slot} is in use by another process; wait for it to finish")
