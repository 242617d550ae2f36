"""The anomalies injected into valid data, each at its configured rate (docs/internals/generator.md, Files and
anomalies)."""

from __future__ import annotations

import math
from random import Random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from logistics_platform.generator import encode as E
from logistics_platform.generator import world as W
from logistics_platform.generator.config import INVALID_LINE_RATES, TABLES, GeneratorConfig
from logistics_platform.generator.layout import Layout
from logistics_platform.generator.model import (
    DECIMAL_NUMBERS,
    EPOCH_MICROS,
    HOUR_US,
    KEYS,
    MINUTE,
    PRECISE,
    SECOND,
    T_ORDERS,
    T_PAYMENTS,
    T_PINGS,
    Period,
)
from logistics_platform.generator.summary import TopicStats
from logistics_platform.lib import contract

INV20 = 1.0 / (1 << 20)  # a 20-bit slice of a random draw as a fraction of 1
OOO_MAX_GAP_US = 3 * HOUR_US  # an out-of-order change overtakes a next change at most this far ahead
DUP_MAX_DELAY_US = 6 * HOUR_US


def plan_delayed_files(cfg: GeneratorConfig, rng: Random) -> set[tuple[int, int]]:
    """The (topic index, arrival hour) pairs that get one file uploaded ``delayed_file_hours`` late."""
    plan: set[tuple[int, int]] = set()
    if cfg.hours <= cfg.delayed_file_hours:
        return plan
    for i in range(cfg.delayed_files):
        ti = (T_ORDERS, T_PAYMENTS, T_PINGS)[i % 3]  # in turn
        for _ in range(20):
            a = rng.randrange(0, cfg.hours - cfg.delayed_file_hours)
            if (ti, a) not in plan:
                plan.add((ti, a))
                break
    return plan


def late_boost(cfg: GeneratorConfig, k_min: int) -> float:
    """1 / share of the events that can still arrive k_min hours later in the period (docs/internals/generator.md)."""
    weights = [W.HOURLY_SHARE[(cfg.start.hour + h) % 24] for h in range(cfg.hours)]
    eligible = sum(weights[: max(0, cfg.hours - k_min)])
    return sum(weights) / eligible if eligible > 0 else 0.0


def encoders(flags: int) -> tuple[E.ValueFn, E.ValueFn]:
    """The timestamp and decimal encoders of a change's encoding flags."""
    return (
        E.ts_epoch if flags & EPOCH_MICROS else E.ts_iso,
        E.dec_num if flags & DECIMAL_NUMBERS else (E.dec_b64 if flags & PRECISE else E.dec_str),
    )


class Faults:
    """Decides which events go wrong and how, places their copies (public rates: the CDC hot loop rolls them inline)."""

    def __init__(
        self, cfg: GeneratorConfig, period: Period, rng: Random, stats: list[TopicStats], layout: Layout
    ) -> None:
        self.period = period
        self.rng = rng
        self.stats = stats
        self.layout = layout
        lateness = cfg.allowed_lateness_hours
        # Arrival-hour offsets (from the event's hour) that are surely within (1 .. k_within) / surely beyond L.
        self._k_within = math.floor(lateness)
        self._k_beyond_min = math.ceil(lateness) + 1
        self._p_beyond = min(1.0, cfg.late_beyond_rate * late_boost(cfg, self._k_beyond_min))
        p_within = min(1.0, cfg.late_within_rate * late_boost(cfg, 1)) if self._k_within else 0.0
        self._p_late = self._p_beyond + p_within
        self._p_ooo = cfg.out_of_order_rate
        self._ooo_owed = 0.0
        self.schema_rate = cfg.schema_envelope_rate
        self.dup_rate = cfg.duplicate_rate
        self._epoch_rate = cfg.epoch_micros_rate
        self._number_rate = cfg.decimal_number_rate
        self.precise_rate = cfg.precise_decimal_rate
        # a stream of its own: the shared stream's draws stay those of a config without precise decimals
        self._precise_rng = Random(f"{cfg.seed}:precise-decimals")
        self._malformed_kinds = [(name.removesuffix("_rate"), getattr(cfg, name)) for name in INVALID_LINE_RATES]
        self.bad_total = cfg.malformed_total
        self._ping_malformed = [(k, r) for k, r in self._malformed_kinds if k in E.PLAIN_REASONS]
        # JsonConverter schemas per CDC table, indexed by (flags >> 2) & 7: with tip_amount or not, precise decimals
        # or not, with the coordinates or not
        self.schemas: dict[str, list[str]] = {}
        for t in TABLES[:T_PINGS]:
            added = tuple(c.name for c in contract.SOURCES[t].added_columns)
            extra = [tuple(c for c in added if v & (4 if c in contract.ORDER_COORDINATES else 1)) for v in range(8)]
            self.schemas[t] = [E.connect_schema(t, extra[v], precise=bool(v & 2)) for v in range(8)]

    def encoding_flags(self, decimals: bool = False) -> int:
        """Encoding flags of one change: EPOCH_MICROS at ``epoch_micros_rate``, DECIMAL_NUMBERS at its rate, and for
        a row with ``decimals`` whose decimals are not numbers, PRECISE at ``precise_decimal_rate``."""
        bits = self.rng.getrandbits(40)
        flags = (EPOCH_MICROS if (bits & 0xFFFFF) * INV20 < self._epoch_rate else 0) | (
            DECIMAL_NUMBERS if (bits >> 20) * INV20 < self._number_rate else 0
        )
        # the precise dice is rolled also for decimals as numbers: its stream does not depend on the shared one
        precise = decimals and self.precise_rate and self._precise_rng.random() < self.precise_rate
        return flags | PRECISE if precise and not flags & DECIMAL_NUMBERS else flags

    def offline_upload(self, t0: int, t_stop: int) -> tuple[int, int]:
        """A trip's pings (t0 .. t_stop) uploaded together later by a phone that was offline: the upload's start
        time and kind (1 within L, 2 beyond L), or (-1, 0) for a phone online as usual."""
        rng, period = self.rng, self.period
        hours, late = period.hours, period.late_us
        r = rng.random()
        last_hour = period.hour_of(t_stop - 1)
        a, kind = hours, 0
        if r < self._p_beyond:
            a = last_hour + self._k_beyond_min + rng.randrange(max(1, min(3, hours - last_hour - self._k_beyond_min)))
            kind = 2
        elif r < self._p_late and period.hour_start(last_hour + 1) - t0 <= late:
            a, kind = last_hour + 1, 1
        if a >= hours:
            return -1, 0
        return period.hour_start(a) + rng.randrange(50 * MINUTE), kind

    def arrival(self, st: TopicStats, commit_us: int, next_commit: int | None, r: float) -> int | None:
        """A CDC change's arrival when late (``r``: its dice; beyond L when r < p_beyond, else within L) or out of order
        (docs/internals/generator.md); None: the usual lag."""
        period = self.period
        self._ooo_owed += self._p_ooo
        if r < self._p_beyond:
            eh = period.hour_of(commit_us)
            a = eh + self._k_beyond_min + self.rng.randrange(max(1, min(4, period.hours - eh - self._k_beyond_min)))
            if a < period.hours:
                st.late_beyond_injected += 1
                return period.hour_start(a) + self.rng.randrange(HOUR_US)
        elif r < self._p_late:  # then L >= 1 h (else p_within is 0)
            eh = period.hour_of(commit_us)
            a = eh + self.rng.randint(1, max(1, min(self._k_within, period.hours - 1 - eh)))
            if a < period.hours:
                st.late_within_injected += 1
                return period.hour_start(a) + self.rng.randrange(HOUR_US)
        if (
            next_commit is not None
            and 0 < next_commit - commit_us < OOO_MAX_GAP_US
            and self.rng.random() < self._ooo_owed
        ):
            cand = next_commit + 40 * SECOND + int(self.rng.random() * (20 * MINUTE - 40 * SECOND))
            if cand < period.end_us:
                st.out_of_order_injected += 1
                self._ooo_owed -= 1.0
                return cand
        return None

    def redeliver(
        self, ti: int, arrival: int, line: str, key: Any, lsn: int, nlines: int, event_us: int, wrapped: bool
    ) -> None:
        """A redelivered copy of a CDC line: half land within minutes, half hours later, inside the period."""
        rng, room = self.rng, self.period.end_us - 1 - arrival
        if room <= SECOND:
            return
        if rng.random() < 0.5 or room <= 10 * MINUTE:
            delay = rng.randrange(SECOND, min(10 * MINUTE, room))
        else:
            delay = rng.randrange(10 * MINUTE, min(DUP_MAX_DELAY_US, room))
        avro = self.layout.add(ti, arrival + delay, line, key, lsn, nlines, event_us)
        self.stats[ti].duplicates += 1
        self.stats[ti].schema_envelopes += wrapped and not avro

    def corrupt(self, ti: int, line: str, arrival: int, where: Any, x: float, flags: int = 0) -> None:
        """File a broken copy of a valid line: a CDC change of row ``where`` (not in an Avro file) or a ping of
        partition ``where``; ``x`` in [0, their rates' sum) picks the defect."""
        kinds = self._ping_malformed if ti == T_PINGS else self._malformed_kinds
        kind = kinds[-1][0]
        for name, rate in kinds:
            if x < rate:
                kind = name
                break
            x -= rate
        rng = self.rng
        schema = None
        if ti != T_PINGS and rng.random() < self.schema_rate:
            schema = self.schemas[TABLES[ti]][(flags >> 2) & 7]
        bad, reason = E.corrupt(line, TABLES[ti], KEYS[ti], kind, rng, schema)
        arrival = min(arrival + rng.randrange(1000, SECOND), self.period.end_us - 1)
        if ti == T_PINGS:
            a: int | None = self.layout.add_ping_line(arrival, where, bad)
        else:
            a = self.layout.add_corrupted(ti, arrival, bad, where)
        if a is not None:
            self.stats[ti].quarantined(a, reason)

    def copy_pings(self, rows: pa.Table) -> None:
        """Redelivered and corrupted copies of ping rows, picked by each row's ``dice`` column."""
        dice, p_dup = rows.column("dice"), self.dup_rate
        p_bad = sum(rt for _, rt in self._ping_malformed)
        if p_dup > 0:
            self._redeliver_pings(rows.filter(pc.less(dice, p_dup)))
        if p_bad > 0:
            bad = rows.filter(pc.and_(pc.greater_equal(dice, p_dup), pc.less(dice, p_dup + p_bad)))
            for r in bad.to_pylist():
                line = E.ping_line(r["pid"], r["cid"], r["oid"], r["lat"], r["lon"], r["speed"], r["t"])
                self.corrupt(T_PINGS, line, r["arrival"], r["part"], r["dice"] - p_dup)

    def _redeliver_pings(self, rows: pa.Table) -> None:
        """Redelivered copies: same ping, landing seconds to hours later (inside the period)."""
        rng, n = self.rng, rows.num_rows
        if n == 0:
            return
        arrival = rows.column("arrival")
        room = pc.subtract(self.period.end_us - 1, arrival)
        short = pc.or_(pc.less(pc.random(n, initializer=rng.getrandbits(62)), 0.5), pc.less_equal(room, 10 * MINUTE))
        lo = pc.if_else(short, SECOND, 10 * MINUTE)
        hi = pc.min_element_wise(pc.if_else(short, 10 * MINUTE, DUP_MAX_DELAY_US), room)
        u = pc.random(n, initializer=rng.getrandbits(62))
        delay = pc.add(lo, pc.cast(pc.floor(pc.multiply(u, pc.cast(pc.subtract(hi, lo), pa.float64()))), pa.int64()))
        ok = pc.greater(room, SECOND)
        copies = rows.set_column(rows.schema.get_field_index("arrival"), "arrival", pc.add(arrival, delay)).filter(ok)
        self.stats[T_PINGS].duplicates += copies.num_rows
        self.layout.add_pings(copies.drop_columns(["dice"]))
