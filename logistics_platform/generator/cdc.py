"""The change stream: queued transactions commit in order, become envelopes and are routed to their arrival hours
(docs/internals/generator.md, Flow)."""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from random import Random

from logistics_platform.generator import encode as E
from logistics_platform.generator.config import TABLES
from logistics_platform.generator.faults import INV20, Faults
from logistics_platform.generator.layout import Layout
from logistics_platform.generator.model import (
    DECIMAL_NUMBERS,
    EPOCH_MICROS,
    HOUR_US,
    PRECISE,
    WITH_TIP,
    Change,
    Period,
    Transaction,
)
from logistics_platform.generator.summary import TopicStats

# (commit time, sequence number, changes, snapshot): the sequence keeps transactions of one microsecond in plan order
Queued = tuple[int, int, list[Change], bool]


@dataclass
class CommitQueue:
    """Transactions planned by the world, waiting for the hour they commit in."""

    period: Period
    by_hour: dict[int, list[Queued]] = field(default_factory=dict)
    seq: int = 0

    def add(self, txs: list[Transaction]) -> None:
        """Queue transactions ``(commit time, changes, snapshot)`` for their commit hours; those at or after the
        end never happen. Takes a list: an order has several transactions and this runs for every order."""
        start_us, end_us, by_hour = self.period.start_us, self.period.end_us, self.by_hour
        seq = self.seq
        for t, chs, snap in txs:
            if t >= end_us:
                continue
            if t < start_us:
                raise RuntimeError(f"generator bug: transaction at {E.iso(t)} before the period starts")
            seq += 1
            by_hour.setdefault((t - start_us) // HOUR_US, []).append((t, seq, chs, snap))
        self.seq = seq

    def pop(self, h: int) -> list[Queued]:
        """The transactions committing in hour ``h``, in commit order."""
        txs = self.by_hour.pop(h, [])
        txs.sort(key=itemgetter(0, 1))
        return txs


@dataclass
class ChangeStream:
    """Commits the queued transactions hour by hour and routes every change into the layout."""

    period: Period
    rng: Random
    stats: list[TopicStats]
    queue: CommitQueue
    faults: Faults
    layout: Layout
    wal: tuple[int, int]  # the LSN and txId the database is at

    def commit_hour(self, h: int) -> None:
        """Commit hour h's transactions, route every change and its copies (hot loop: docs/internals/generator.md)."""
        txs = self.queue.pop(h)
        rnd, getbits = self.rng.random, self.rng.getrandbits
        faults, layout, stats = self.faults, self.layout, self.stats
        arrival_of, add = faults.arrival, layout.add
        schemas = faults.schemas
        end_us = self.period.end_us
        schema_rate, dup_rate, bad_total = faults.schema_rate, faults.dup_rate, faults.bad_total
        wrap = E.wrap_with_schema
        lsn, tx_id = self.wal
        # per topic and op: changes committed (folded into the stats after the loop, cheaper than per change)
        op_counts: list[dict[str, int]] = [{"c": 0, "u": 0, "d": 0, "r": 0} for _ in range(4)]
        for commit_us, _, changes, snapshot in txs:
            tx_id += 1 + int(rnd() * 3)
            prev = lsn
            commit_ms = commit_us // 1000
            n = len(changes)
            if snapshot:
                lsn += 40 + int(rnd() * 360)
            for i, ch in enumerate(changes):
                if snapshot:
                    flag = "first" if i == 0 else ("last" if i == n - 1 else "true")
                else:
                    lsn += 40 + int(rnd() * 360)
                    flag = "false"
                ti, op, key, before, after, next_commit, flags = ch
                st = stats[ti]
                # One 64-bit draw: lateness dice (20 bits), envelope-form dice (20 bits), connector/sink lag (24).
                bits = getbits(64)
                arrival = arrival_of(st, commit_us, next_commit, (bits & 0xFFFFF) * INV20)
                sink_lag = 100_000 + ((bits >> 52) & 0xFFF) * 7_300  # 0.1 .. 30 s from processing to file
                if arrival is None:
                    connector = commit_us + 50_000 + ((bits >> 40) & 0xFFF) * 475  # 0.05 .. 2 s after commit
                    arrival = min(connector + sink_lag, end_us - 1)
                else:
                    connector = max(arrival - sink_lag, commit_us + 50_000)
                table = TABLES[ti]
                # The Debezium change event as JsonConverter writes it with schemas.enable=false, inlined: a call
                # with ten arguments per change was a tenth of this loop (tests/generator checks it against a reference)
                env = (
                    f'{{"before":{before},"after":{after},"source":{{"version":"{E.DEBEZIUM_VERSION}",'
                    f'"connector":"postgresql","name":"oltp","ts_ms":{commit_ms},"snapshot":"{flag}","db":"oltp",'
                    f'"sequence":"[\\"{prev}\\",\\"{lsn}\\"]","schema":"public","table":"{table}","txId":{tx_id},'
                    f'"lsn":{lsn},"xmin":null}},"op":"{op}","ts_ms":{connector // 1000},"transaction":null}}'
                )
                wrapped = ((bits >> 20) & 0xFFFFF) * INV20 < schema_rate
                line = wrap(schemas[table][(flags >> 2) & 7], env) if wrapped else env  # (flags >> 2) & 7: its schema
                nlines = 1
                if op == "d":
                    line += "\nnull"
                    nlines = 2
                # True when the line lands in an Avro file: then its JSON encoding choices do not show
                avro = add(ti, arrival, line, key, lsn, nlines, commit_us)
                op_counts[ti][op] += 1
                if wrapped and not avro:
                    st.schema_envelopes += 1
                if flags and not avro:  # encodings that show (not in an Avro file)
                    st.epoch_micros += bool(flags & EPOCH_MICROS)
                    st.decimal_numbers += bool(flags & DECIMAL_NUMBERS)
                    st.precise_decimals += bool(flags & PRECISE)
                if flags & WITH_TIP:
                    st.tip_amount_events += 1
                x = rnd()
                if x < dup_rate:
                    faults.redeliver(ti, arrival, line, key, lsn, nlines, commit_us, wrapped)
                elif op != "d" and x < dup_rate + bad_total:
                    faults.corrupt(ti, env, arrival, key, x - dup_rate, flags)
        self.wal = (lsn, tx_id)
        for st, counted in zip(stats, op_counts, strict=False):
            for op, n in counted.items():
                st.ops[op] += n
                st.events += n
