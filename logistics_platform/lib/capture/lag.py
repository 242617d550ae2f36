"""How far capture is behind its source, and when that deserves a warning or an alert (pure decisions + one query)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from logistics_platform.lib.capture.landing_writer import read_manifest
from logistics_platform.lib.capture.replication import connect
from logistics_platform.lib.capture.slot import SlotInfo, slot_info


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
    conn = connect(dsn)
    try:
        info = slot_info(conn, slot)
    finally:
        conn.close()
    manifest = read_manifest(landing_dir, slot)
    return lag_from(info, slot, manifest.commit_ms if manifest else None, int(time.time() * 1000))
