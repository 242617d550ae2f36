"""Query-based capture where replication is not allowed: poll each table by ``updated_at`` (docs/capture.md)."""

from __future__ import annotations

from contextlib import closing
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from logistics_platform.lib.capture.envelope import change_event, topic_of
from logistics_platform.lib.capture.landing_writer import LandingWriter
from logistics_platform.lib.capture.replication import CaptureResult, database, now_us
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.capture.slot import connect
from logistics_platform.lib.timekeys import epoch_micros, from_epoch_micros


def plan_table(
    table: str, rows: list[dict[str, Any]], state: dict[str, Any] | None, overlap_us: int
) -> tuple[list[tuple[str, dict[str, Any], int]], dict[str, Any]]:
    """(op, row, version) to land for one table's rows, and its next state ``{"watermark_us", "seen": [[key, us]]}``."""
    key = KEYS[table]
    seen = {(str(k), int(v)) for k, v in (state or {}).get("seen", [])}
    first = state is None
    out: list[tuple[str, dict[str, Any], int]] = []
    watermark = int(state["watermark_us"]) if state else None
    for row in rows:
        version = epoch_micros(row["updated_at"])
        if (str(row[key]), version) in seen:
            continue  # read again inside the overlap window: landed already
        # A row is new when created_at = updated_at (tenants and couriers have no created_at: u).
        op = "r" if first else "c" if row.get("created_at") == row["updated_at"] else "u"
        out.append((op, row, version))
        watermark = version if watermark is None else max(watermark, version)
    if watermark is None:
        return out, {"watermark_us": None, "seen": []} if first else dict(state or {})
    floor = watermark - overlap_us
    versions = seen | {(str(row[key]), v) for _op, row, v in out}
    return out, {"watermark_us": watermark, "seen": sorted([k, v] for k, v in versions if v >= floor)}


def capture_query(dsn: str, landing_dir: Path, slot: str, overlap_seconds: float) -> CaptureResult:
    """One poll of every table; lands what changed since the last poll (as far as a query can tell)."""
    result = CaptureResult(mode="query")
    overlap_us = int(overlap_seconds * 1_000_000)
    with closing(connect(dsn)) as conn:
        db = database(conn)
        # Query mode keeps its own manifest: its positions are timestamps, not LSNs.
        with LandingWriter(landing_dir, f"{slot}_query") as writer:
            tables_state: dict[str, Any] = dict(writer.manifest.state.get("tables", {}))
            lines: dict[str, list[str]] = {}
            conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
            with conn.cursor() as cur:
                for table in TABLES:  # every column: also those added part way (orders' coordinates)
                    st = tables_state.get(table)
                    wm = st.get("watermark_us") if st else None
                    # An aware bound: a naive one would be read in the session's time zone.
                    since = [] if wm is None else [from_epoch_micros(wm - overlap_us).replace(tzinfo=UTC)]
                    where = "where updated_at >= %s" if since else ""
                    cur.execute(f"select * from public.{table} {where} order by updated_at, {KEYS[table]}", since)
                    columns = [d.name for d in cur.description]
                    rows = [dict(zip(columns, r, strict=True)) for r in cur.fetchall()]
                    planned, tables_state[table] = plan_table(table, rows, st, overlap_us)
                    event = partial(change_event, table, before=None, tx_id=None, processed_us=now_us(), db=db)
                    topic_lines = lines[topic_of(table)] = []
                    for op, row, v in planned:
                        seq, snap = (None, "true") if op == "r" else (v, "false")
                        topic_lines.append(event(op, after=row, lsn=v, sequence_lsn=seq, commit_us=v, snapshot=snap))
                    result.changes += len(planned)
            conn.rollback()
            result.files = writer.commit(lines, datetime.now(UTC), state={"tables": tables_state})
    return result
