"""Query-based capture for sources where replication is not allowed: poll each table by ``updated_at``.

Each poll reads, in one repeatable-read transaction, every row with ``updated_at`` at or after the table's
watermark minus an overlap window, skips the row versions (key, updated_at) already landed, and lands the rest
as Debezium envelopes with ``source.lsn`` = ``updated_at`` in epoch microseconds (the order of a row's versions)
and ``source.ts_ms`` = ``updated_at``. The first poll of a table lands ``op: r``; later ones ``c`` when the row
is new (``created_at = updated_at``) and ``u`` otherwise (tenants and couriers have no ``created_at``: ``u``).

What it cannot see (docs/capture.md, and tests/capture/test_query_mode.py proves each):
- hard deletes: a deleted row is simply no longer returned;
- intermediate states: a row changed twice between polls lands only its last version;
- commits later than the overlap: a transaction whose ``updated_at`` is older than watermark - overlap when it
  becomes visible (a long transaction, or a writer whose clock runs behind) is never read.
"""

from __future__ import annotations

import time
from datetime import UTC
from pathlib import Path
from typing import Any

from logistics_platform.lib.capture.envelope import change_event, topic_of
from logistics_platform.lib.capture.landing_writer import LandingWriter
from logistics_platform.lib.capture.replication import CaptureResult, Clock, connect, utc_now
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.timekeys import epoch_micros, from_epoch_micros


def manifest_name(slot: str) -> str:
    """Query mode keeps its own manifest: its positions are timestamps, not LSNs."""
    return f"{slot}_query"


def plan_table(
    table: str,
    rows: list[dict[str, Any]],
    state: dict[str, Any] | None,
    overlap_us: int,
) -> tuple[list[tuple[str, dict[str, Any], int]], dict[str, Any]]:
    """(op, row, version) to land for one table's polled rows, and the table's next state. Pure.

    ``state`` is ``{"watermark_us": int, "seen": [[key, version_us], ...]}`` from the previous poll, or None.
    """
    key = KEYS[table]
    seen = {(str(k), int(v)) for k, v in (state or {}).get("seen", [])}
    first = state is None
    out: list[tuple[str, dict[str, Any], int]] = []
    watermark = int(state["watermark_us"]) if state else None
    for row in rows:
        version = epoch_micros(row["updated_at"])
        if (str(row[key]), version) in seen:
            continue  # read again inside the overlap window: landed already
        if first:
            op = "r"
        elif "created_at" in row and row["created_at"] == row["updated_at"]:
            op = "c"
        else:
            op = "u"
        out.append((op, row, version))
        watermark = version if watermark is None else max(watermark, version)
    if watermark is None:
        return out, {"watermark_us": None, "seen": []} if first else dict(state or {})
    floor = watermark - overlap_us
    versions = seen | {(str(row[key]), v) for _op, row, v in out}
    return out, {"watermark_us": watermark, "seen": sorted([k, v] for k, v in versions if v >= floor)}


def capture_query(
    dsn: str, landing_dir: Path, slot: str, overlap_seconds: float, clock: Clock = utc_now
) -> CaptureResult:
    """One poll of every table; lands what changed since the last poll (as far as a query can tell)."""
    result = CaptureResult(mode="query")
    overlap_us = int(overlap_seconds * 1_000_000)
    conn = connect(dsn)
    try:
        db = str(conn.get_dsn_parameters().get("dbname", "oltp"))
        with LandingWriter(landing_dir, manifest_name(slot)) as writer:
            tables_state: dict[str, Any] = dict(writer.manifest.state.get("tables", {}))
            lines: dict[str, list[str]] = {}
            conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
            with conn.cursor() as cur:
                for table, columns in TABLES.items():
                    st = tables_state.get(table)
                    wm = st.get("watermark_us") if st else None
                    cols = ", ".join(columns)
                    if wm is None:
                        cur.execute(f"select {cols} from public.{table} order by updated_at, {KEYS[table]}")
                    else:
                        # An aware bound: a naive one would be read in the session's time zone.
                        cur.execute(
                            f"select {cols} from public.{table} where updated_at >= %s"
                            f" order by updated_at, {KEYS[table]}",
                            (from_epoch_micros(wm - overlap_us).replace(tzinfo=UTC),),
                        )
                    rows = [dict(zip(columns, r, strict=True)) for r in cur.fetchall()]
                    planned, tables_state[table] = plan_table(table, rows, st, overlap_us)
                    now_us = time.time_ns() // 1000
                    lines[topic_of(table)] = [
                        change_event(
                            table,
                            op,
                            None,
                            row,
                            lsn=version,
                            sequence_lsn=None if op == "r" else version,
                            commit_us=version,
                            tx_id=None,
                            processed_us=now_us,
                            db=db,
                            snapshot="true" if op == "r" else "false",
                        )
                        for op, row, version in planned
                    ]
                    result.changes += len(planned)
            conn.rollback()
            result.files = writer.commit(lines, clock(), state={"tables": tables_state})
    finally:
        conn.close()
    return result
