"""Logical-replication capture: slot, exported snapshot, then the ``pgoutput`` stream (docs/capture.md)."""

from __future__ import annotations

import select
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from logistics_platform.lib.capture import pgoutput as pg
from logistics_platform.lib.capture.envelope import change_event, lines_of, row_from_tuple, topic_of
from logistics_platform.lib.capture.landing_writer import LandingWriter
from logistics_platform.lib.capture.schema import KEYS, TABLES, ensure_publication
from logistics_platform.lib.capture.slot import (
    CaptureError,
    check_server,
    check_slot,
    connect,
    int_to_lsn,
    lsn_to_int,
    released_slot_info,
    slot_info,
)

# Stages passed to the hook: after the batch is durable in the landing zone, before the slot is confirmed.
STAGE_DURABLE = "durable"
Hook = Callable[[str, int], None]
MAX_BATCH_CHANGES = 50_000  # changes per landed batch at most (whole transactions)
IDLE_SECONDS = 2.0  # a capture not yet caught up stops after five times this without a message


@dataclass
class CaptureResult:
    mode: str
    created_slot: bool = False
    snapshot_rows: int = 0
    transactions: int = 0
    changes: int = 0
    skipped_transactions: int = 0  # already landed before a crash, resent by the server
    files: list[str] = field(default_factory=list)
    lsn: int = 0

    def render(self) -> str:
        parts = [f"capture ({self.mode}):"]
        if self.created_slot:
            parts.append(f"new slot, snapshot of {self.snapshot_rows:,} rows;")
        parts.append(f"{self.transactions:,} transactions, {self.changes:,} changes, {len(self.files)} files")
        if self.skipped_transactions:
            parts.append(f"({self.skipped_transactions:,} already landed, skipped)")
        if self.lsn:
            parts.append(f"up to LSN {int_to_lsn(self.lsn)}")
        return " ".join(parts)


def now_us() -> int:
    return time.time_ns() // 1000


def database(conn: Any) -> str:
    """The database name of ``conn`` (the envelopes' ``source.db``)."""
    return str(conn.get_dsn_parameters().get("dbname", "oltp"))


@dataclass
class _Batch:
    """Lines per topic of whole transactions, not yet landed."""

    lines: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    changes: int = 0
    transactions: int = 0
    end_lsn: int = 0
    commit_ms: int | None = None


def snapshot_flags(table_rows: list[int]) -> list[list[str]]:
    """``source.snapshot`` of every row of a snapshot of tables with these row counts, as Debezium 3.6 writes it."""
    out = []
    for n in table_rows:
        flags = ["true"] * n
        if n:
            flags[0] = "first_in_data_collection"
            flags[-1] = "last_in_data_collection" if n > 1 else flags[0]
        out.append(flags)
    nonempty = [flags for flags in out if flags]
    if nonempty:
        nonempty[0][0] = "first"
        nonempty[-1][-1] = "last"
    return out


def _create_slot(conn: Any, dsn: str, slot: str, writer: LandingWriter, result: CaptureResult) -> None:
    """Create the slot with an exported snapshot and land that snapshot as op r in one batch (docs/capture.md)."""
    with closing(connect(dsn, replication=True)) as repl:
        with repl.cursor() as rcur:
            try:
                rcur.execute(f'CREATE_REPLICATION_SLOT "{slot}" LOGICAL pgoutput EXPORT_SNAPSHOT')
            except Exception as exc:
                raise CaptureError(f"capture: cannot create replication slot {slot}: {str(exc).strip()}") from None
            _name, consistent_point, snapshot_name, _plugin = rcur.fetchone()
            # The snapshot lives until this connection runs another command: read it now, from the other one.
            info = slot_info(conn, slot)
            point = lsn_to_int(consistent_point)
            assert point is not None
            # Snapshot events carry the slot's restart LSN as source.lsn; the stream starts at the consistent point.
            lsn = info.restart_lsn if info and info.restart_lsn else point
            db = database(conn)
            conn.autocommit = True  # the snapshot must be set by the transaction's first statement, so begin it here
            with conn.cursor() as cur:
                cur.execute("begin isolation level repeatable read read only")
                cur.execute("set transaction snapshot %s", (snapshot_name,))
                # The connector's snapshot rows carry its snapshot transaction's id as txId, its start time as ts_ms.
                cur.execute("select (extract(epoch from now()) * 1000000)::bigint, txid_current()")
                ts_us, tx_id = (int(v) for v in cur.fetchone())
                # The connector's table order (by name) and rows, so that its snapshot flags fall on the same rows.
                tables = sorted(TABLES)
                rows_of: dict[str, list[dict[str, Any]]] = {}
                for table in tables:  # every column, as the stream sends them: also those added part way
                    cur.execute(f"select * from public.{table} order by {KEYS[table]}")
                    columns = [d.name for d in cur.description]
                    rows_of[table] = [dict(zip(columns, values, strict=True)) for values in cur.fetchall()]
                cur.execute("commit")
            conn.autocommit = False
        flags = snapshot_flags([len(rows_of[t]) for t in tables])
        event = partial(
            change_event, op="r", before=None, lsn=lsn, sequence_lsn=None, commit_us=ts_us, tx_id=tx_id, db=db
        )
        batch: dict[str, list[str]] = {}
        for table, table_flags in zip(tables, flags, strict=True):
            rows = zip(rows_of[table], table_flags, strict=True)
            batch[topic_of(table)] = [event(table, after=row, processed_us=now_us(), snapshot=f) for row, f in rows]
            result.snapshot_rows += len(rows_of[table])
        result.files += writer.commit(
            batch, datetime.now(UTC), lsn=point, commit_ms=ts_us // 1000, state={"snapshot": "done"}
        )
    result.created_slot = True


def capture_logical(
    dsn: str, landing_dir: Path, slot: str, publication: str, *, resnapshot: bool = False, hook: Hook | None = None
) -> CaptureResult:
    """Land every change committed so far (a snapshot first when the slot is new), confirm it, and return."""
    result = CaptureResult(mode="logical")
    with closing(connect(dsn)) as conn:
        check_server(conn)
        with LandingWriter(landing_dir, slot) as writer:
            info = released_slot_info(conn, slot)
            if resnapshot:
                if info is not None:
                    with conn.cursor() as cur:
                        cur.execute("select pg_drop_replication_slot(%s)", (slot,))
                    conn.commit()
                    info = None
                writer.commit({}, datetime.now(UTC), lsn=0, state={})
            landed = writer.manifest.lsn if writer.manifest.state.get("snapshot") == "done" else 0
            check_slot(info, slot, landed)
            try:
                ensure_publication(conn, publication)
            except Exception as exc:
                conn.rollback()
                raise CaptureError(
                    f"capture: cannot create publication {publication}: {str(exc).strip().splitlines()[0]}"
                ) from None
            if info is None:
                _create_slot(conn, dsn, slot, writer, result)
            _stream(conn, dsn, slot, publication, writer, result, hook)
            result.lsn = writer.manifest.lsn
    return result


def _stream(
    conn: Any, dsn: str, slot: str, publication: str, writer: LandingWriter, result: CaptureResult, hook: Hook | None
) -> None:
    with conn.cursor() as cur:
        # The insert position, not the write or flush one: asynchronous commits are visible before their WAL is
        # written; the walsender sends them once flushed.
        cur.execute("select pg_current_wal_insert_lsn()::text")
        target = lsn_to_int(cur.fetchone()[0]) or 0
    conn.commit()
    db = database(conn)
    landed = writer.manifest.lsn
    with closing(connect(dsn, replication=True)) as repl:
        rcur = repl.cursor()
        rcur.start_replication(
            slot_name=slot,
            decode=False,
            # From the slot's confirmed position, not the manifest's: after a crash the server resends what was
            # landed but never confirmed, and the commit filter below skips it (it is not trusted to the server).
            start_lsn=0,
            options={"proto_version": "1", "publication_names": publication},
        )
        relations: dict[int, tuple[str, tuple[str, ...], tuple[int, ...]]] = {}
        batch = _Batch()
        txn: list[tuple[str, str, int, Any, Any]] | None = None
        begin: pg.Begin | None = None
        # The connector's source.sequence starts with the end LSN of the last commit it streamed before.
        last_commit_end = landed
        last_message = time.monotonic()

        def flush() -> None:
            nonlocal batch
            if not batch.transactions:
                return
            result.files += writer.commit(batch.lines, datetime.now(UTC), lsn=batch.end_lsn, commit_ms=batch.commit_ms)
            result.transactions += batch.transactions
            result.changes += batch.changes
            if hook is not None:
                hook(STAGE_DURABLE, batch.end_lsn)
            rcur.send_feedback(flush_lsn=batch.end_lsn, force=True)
            batch = _Batch()

        while True:
            msg = rcur.read_message()
            if msg is None:
                idle = time.monotonic() - last_message
                caught_up = (rcur.wal_end or 0) >= target
                if txn is None and (caught_up or idle > IDLE_SECONDS * 5) and idle > min(IDLE_SECONDS, 0.2):
                    break
                rcur.send_feedback(reply=True)
                select.select([rcur], [], [], min(IDLE_SECONDS, 0.2))
                continue
            last_message = time.monotonic()
            m = pg.decode(msg.payload)
            if isinstance(m, pg.Relation):
                names = tuple(c.name for c in m.columns)
                relations[m.relid] = (m.name, names, tuple(c.type_oid for c in m.columns))
            elif isinstance(m, pg.Begin):
                txn, begin = [], m
            elif isinstance(m, pg.Insert | pg.Update | pg.Delete | pg.Truncate):
                if txn is None:
                    raise CaptureError("capture: the stream sent a change outside a transaction; re-run capture")
                if isinstance(m, pg.Truncate):  # one op t event per table, as the connector sends
                    txn += [(relations[relid][0], "t", msg.data_start, None, None) for relid in m.relids]
                    continue
                table, names, oids = relations[m.relid]
                if isinstance(m, pg.Delete):
                    old = row_from_tuple(names, oids, m.old)
                    key = KEYS.get(table)
                    key_image = {key: old[key]} if m.old_is_key_only and key else old
                    txn.append((table, "d", msg.data_start, key_image, None))
                elif isinstance(m, pg.Update):
                    old_image = row_from_tuple(names, oids, m.old) if m.old is not None else None
                    txn.append((table, "u", msg.data_start, old_image, row_from_tuple(names, oids, m.new)))
                else:
                    txn.append((table, "c", msg.data_start, None, row_from_tuple(names, oids, m.new)))
            elif isinstance(m, pg.Commit):
                if txn is None or begin is None:
                    raise CaptureError("capture: the stream sent a commit without its begin; re-run capture")
                if m.end_lsn <= landed:
                    result.skipped_transactions += 1
                else:
                    event = partial(change_event, sequence_lsn=last_commit_end, commit_us=m.commit_us, tx_id=begin.xid)
                    processed = now_us()
                    for table, op, lsn, before, after in txn:
                        if table in TABLES:
                            line = event(table, op, before, after, lsn=lsn, processed_us=processed, db=db)
                            batch.lines[topic_of(table)] += lines_of(table, op, line)
                            batch.changes += 1
                    batch.transactions += 1
                    batch.end_lsn = m.end_lsn
                    batch.commit_ms = m.commit_us // 1000
                    if batch.changes >= MAX_BATCH_CHANGES:
                        flush()
                last_commit_end = m.end_lsn
                txn, begin = None, None
                if m.end_lsn >= target:
                    break  # drained what was committed when the capture started; later commits are the next run's
        flush()
        # Confirm the manifest's position even when nothing new arrived (what a crash left unconfirmed).
        rcur.send_feedback(flush_lsn=writer.manifest.lsn, force=True)
