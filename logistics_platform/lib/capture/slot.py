"""The OLTP connection, logical capture's preconditions, its slot's state and lag: one-line errors a user can act on."""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logistics_platform.lib.capture.landing_writer import read_manifest


class CaptureError(RuntimeError):
    """Capture cannot run; the message says what is wrong and what to do."""


# The replication session's output: timestamps in UTC, ISO style (what envelope.from_text parses).
SESSION_OPTIONS = "-c TimeZone=UTC -c DateStyle=ISO"


def connect(dsn: str, replication: bool = False) -> Any:
    import psycopg2
    import psycopg2.extras

    factory = psycopg2.extras.LogicalReplicationConnection if replication else None
    try:
        return psycopg2.connect(dsn, connection_factory=factory, options=SESSION_OPTIONS)
    except psycopg2.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CaptureError(f"capture: cannot connect to OLTP_DSN ({first}); check the setting and the server") from None


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
        (level,) = cur.fetchone()
        cur.execute("select rolsuper or rolreplication, current_user from pg_roles where rolname = current_user")
        may_replicate, user = cur.fetchone()
    conn.commit()
    if level != "logical":
        raise CaptureError(
            f"capture: the OLTP server has wal_level={level}; set wal_level = logical in postgresql.conf and restart "
            "it, or use `logistics-platform capture --mode query`"
        )
    if not may_replicate:
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


@dataclass(frozen=True)
class Lag:
    slot: str
    exists: bool
    active: bool = False
    wal_status: str | None = None
    lag_bytes: int | None = None  # WAL written since the slot's confirmed position
    retained_bytes: int | None = None  # WAL the server keeps for the slot
    seconds_behind: float | None = None  # age of the last landed commit, while the slot is behind

    def metadata(self) -> dict[str, object]:
        return {
            "slot": self.slot,
            "slot_exists": self.exists,
            "slot_active": self.active,
            "wal_status": self.wal_status or "",
            "lag_bytes": self.lag_bytes if self.lag_bytes is not None else -1,
            "retained_wal_bytes": self.retained_bytes if self.retained_bytes is not None else -1,
            "seconds_behind": round(self.seconds_behind, 1) if self.seconds_behind is not None else -1.0,
        }


def lag_from(info: SlotInfo | None, slot: str, last_commit_ms: int | None, now_ms: int) -> Lag:
    """The lag of a slot from its state and the commit time of the last landed transaction."""
    if info is None:
        return Lag(slot, exists=False)
    behind = info.lag_bytes or 0
    seconds = None
    if last_commit_ms is not None:
        seconds = max(0.0, (now_ms - last_commit_ms) / 1000) if behind > 0 else 0.0
    return Lag(slot, True, info.active, info.wal_status, info.lag_bytes, info.retained_bytes, seconds)


def lag_problems(lag: Lag, warn_bytes: int, warn_seconds: float) -> list[str]:
    """Why the lag deserves a warning (empty: it does not)."""
    out = []
    if not lag.exists:
        return [f"replication slot {lag.slot} does not exist: run `logistics-platform capture`"]
    if lag.wal_status == "lost":
        out.append(f"replication slot {lag.slot} was invalidated: re-snapshot with `capture --resnapshot`")
    if lag.lag_bytes is not None and lag.lag_bytes > warn_bytes:
        out.append(f"slot {lag.slot} is {lag.lag_bytes:,} WAL bytes behind (limit {warn_bytes:,})")
    if lag.seconds_behind is not None and lag.seconds_behind > warn_seconds:
        out.append(f"slot {lag.slot} is {lag.seconds_behind:,.0f} s behind (limit {warn_seconds:,.0f} s)")
    return out


def retention_alert(lag: Lag, limit_bytes: int) -> str | None:
    """An alert text when the slot is inactive and holds more WAL on the server than ``limit_bytes``."""
    if lag.exists and not lag.active and (lag.retained_bytes or 0) > limit_bytes:
        return (
            f"replication slot {lag.slot} is inactive and retains {lag.retained_bytes:,} bytes of WAL on the OLTP "
            f"server (limit {limit_bytes:,}): run `logistics-platform capture`, or drop the slot if capture is retired"
        )
    return None


def measure(dsn: str, landing_dir: Path, slot: str) -> Lag:
    """Query the slot's state now."""
    with closing(connect(dsn)) as conn:
        info = slot_info(conn, slot)
    manifest = read_manifest(landing_dir, slot)
    return lag_from(info, slot, manifest.commit_ms if manifest else None, int(time.time() * 1000))
