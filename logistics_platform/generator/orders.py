"""Orders and their payments: each order's whole lifecycle planned when it is created (docs/internals/generator.md),
its transactions queued for their commit hours and its courier's trip handed to the pings."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from random import Random
from typing import Any

from logistics_platform.generator import encode as E
from logistics_platform.generator import world as W
from logistics_platform.generator.cdc import CommitQueue
from logistics_platform.generator.config import GeneratorConfig
from logistics_platform.generator.faults import Faults, encoders
from logistics_platform.generator.model import (
    HOUR_US,
    MINUTE,
    NEXT_COMMIT,
    PRECISE,
    SECOND,
    T_ORDERS,
    T_PAYMENTS,
    WITH_COORDINATES,
    WITH_TIP,
    Change,
    Period,
    Transaction,
)
from logistics_platform.generator.pings import Trips
from logistics_platform.generator.roster import Couriers, Tenants
from logistics_platform.lib.timekeys import from_epoch_micros

# Slots of a payment: id, order, amount, method, status, created, updated, its latest change (a Change)
_LATEST = 7


@dataclass(slots=True)
class _Order:
    """One order's row (order, tenant, courier, region, status, total, fee, created, promised, delivered, updated)
    and its payments' rows as they change; renders the row image of every change."""

    row: list[Any]
    tip: int
    tip_from: int | None
    coordinates: tuple[float | None, ...]  # pickup and drop-off (lat, lon); None: the order has none
    method: str
    faults: Faults
    payment_ids: Iterator[int]
    payments: list[list[Any]] = field(default_factory=list)
    prev_after: str = "null"
    latest: Change | None = None
    # (commit time, status) of its changes, in commit order
    statuses: list[tuple[int, str]] = field(default_factory=list)
    # the last change's encoding flags and row values, kept only when precise decimals are on (see change())
    prev_flags: int = 0
    prev_values: list[Any] = field(default_factory=list)

    def change(self, op: str, t: int, updated: int | None = None) -> Change:
        """The order's change committed at ``t`` (its row as it is now; ``updated`` overrides updated_at)."""
        o = self.row
        o[10] = t if updated is None else updated
        flags = self.faults.encoding_flags(decimals=True)
        with_tip = self.tip_from is not None and t >= self.tip_from
        ts, dec = encoders(flags)
        values = [*o, self.tip if with_tip else None, *self.coordinates]
        after = E.row("orders", values, ts=ts, dec=dec)
        flags |= (WITH_TIP if with_tip else 0) | (WITH_COORDINATES if self.coordinates[0] is not None else 0)
        before = self.prev_after if op != "c" and op != "r" else "null"
        if (flags ^ self.prev_flags) & PRECISE and before != "null":
            # one decimal encoding per line (its schema block says which): the before image in this change's
            # (the previous change rendered it in its own; only with precise decimals on, so other bytes stay)
            ts, dec = encoders((self.prev_flags & ~PRECISE) | (flags & PRECISE))
            before = E.row("orders", self.prev_values, ts=ts, dec=dec)
        if self.faults.precise_rate:
            self.prev_flags = flags
            self.prev_values = values
        self.prev_after = after
        self.statuses.append((t, o[4]))
        ch = [T_ORDERS, op, o[0], before, after, None, flags]
        if self.latest is not None:
            self.latest[NEXT_COMMIT] = t
        self.latest = ch
        return ch

    def _payment_change(self, p: list[Any], op: str, before: str, t: int) -> Change:
        """Payment ``p``'s change at ``t`` (its row image in one change's encodings), linked from its previous one."""
        flags = self.faults.encoding_flags(decimals=True)
        ts, dec = encoders(flags)
        ch = [T_PAYMENTS, op, p[0], before, E.row("payments", p[:7], ts=ts, dec=dec), None, flags]
        if p[_LATEST] is not None:
            p[_LATEST][NEXT_COMMIT] = t
        p[_LATEST] = ch
        return ch

    def new_payment(self, op: str, t: int, amount: int, status: str) -> Change:
        """A new payment of the order, inserted at ``t`` (or read by the snapshot: created with the order)."""
        rt = self.row[7] if op == "r" else t
        self.payments.append([next(self.payment_ids), self.row[0], amount, self.method, status, rt, rt, None])
        return self._payment_change(self.payments[-1], op, "null", t)

    def update_payment(self, p: list[Any], t: int, status: str, amount: int | None = None) -> Change:
        """Payment ``p`` updated at ``t`` to ``status`` (and ``amount``)."""
        p[4], p[6] = status, t
        if amount is not None:
            p[2] = amount
        return self._payment_change(p, "u", f'{{"payment_id":{p[0]}}}', t)

    def delete(self, t: int) -> list[Change]:
        """The order and its payments deleted at ``t`` (before images: the order's last row, the payments' keys)."""
        # the before image is the last row as rendered: its decimals keep their encoding (and the schema says so)
        assert self.latest is not None  # deleted after its creation (or snapshot read)
        chs = [[T_ORDERS, "d", self.row[0], self.prev_after, "null", None, self.latest[6] & PRECISE]]
        self.latest[NEXT_COMMIT] = t
        for p in self.payments:
            chs.append([T_PAYMENTS, "d", p[0], f'{{"payment_id":{p[0]}}}', "null", None, 0])
            p[_LATEST][NEXT_COMMIT] = t
        return chs


def _timeline(
    rng: Random, cancel_rate: float, created_us: int, snap_us: int | None
) -> tuple[int, int, int, int, int | None]:
    """When the order is assigned, picked up, in transit, delivered, and cancelled (None: never)."""
    base = snap_us if snap_us is not None else created_us
    if snap_us is not None and rng.random() < 0.5:
        t_assign = created_us + rng.randrange(10 * SECOND, (snap_us - created_us) // 2)
    else:
        t_assign = base + rng.randrange(MINUTE, 8 * MINUTE)
    t_pick = t_assign + rng.randrange(5 * MINUTE, 20 * MINUTE)
    if t_pick <= base:  # assigned before the snapshot: the pick-up still happens after it
        t_pick = base + rng.randrange(MINUTE, 10 * MINUTE)
    t_transit = t_pick + rng.randrange(MINUTE, 3 * MINUTE)
    t_deliv = t_transit + rng.randrange(10 * MINUTE, 50 * MINUTE)
    t_cancel = None
    if rng.random() < cancel_rate:
        t_cancel = base + rng.randrange(2 * MINUTE, 20 * MINUTE)
        if t_cancel >= t_pick:
            t_cancel = t_pick - SECOND
        if t_cancel <= base:
            # a snapshot order picked up within a second after the snapshot: cancel just after it (no extra draw)
            t_pick = max(t_pick, base + 2 * SECOND)
            t_cancel = t_pick - SECOND
    return t_assign, t_pick, t_transit, t_deliv, t_cancel


@dataclass
class OrderBook:
    """Plans the orders of each hour (and those open at the start) and records how each one ends."""

    cfg: GeneratorConfig
    period: Period
    rng: Random
    faults: Faults
    queue: CommitQueue
    tenants: Tenants
    couriers: Couriers
    trips: Trips
    order_id: int = 100_000
    payment_ids: Iterator[int] = field(default_factory=lambda: count(500_001))
    # order -> (status at the end, total cents, deleted)
    final: dict[int, tuple[str, int, bool]] = field(default_factory=dict)
    snapshot_reads: list[Change] = field(default_factory=list)

    def plan_snapshot(self, snap_us: int) -> list[Change]:
        """Orders open when the period starts (``snapshot_rate`` x orders a day); returns their snapshot reads."""
        cfg, rng = self.cfg, self.rng
        for _ in range(round(cfg.snapshot_rate * cfg.orders_per_day)):
            self.plan(self.period.start_us - rng.randrange(2 * MINUTE, 30 * MINUTE), snap_us)
        return self.snapshot_reads

    def plan_hour(self, h: int) -> None:
        """The orders created in hour ``h``: as many as the daily curve gives that hour, at random times."""
        rng = self.rng
        hour_start = self.period.hour_start(h)
        expected = self.cfg.orders_per_day * W.HOURLY_SHARE[from_epoch_micros(hour_start).hour]
        n = int(expected) + (1 if rng.random() < expected - int(expected) else 0)
        for t in sorted(hour_start + rng.randrange(HOUR_US) for _ in range(n)):
            self.plan(t, None)

    def plan(self, created_us: int, snap_us: int | None) -> None:
        """Plan one order's lifecycle: its changes, its payments' changes and its courier's pings (``snap_us``: the
        order was created before the period and is read by the snapshot at that time)."""
        cfg, rng = self.cfg, self.rng
        self.order_id += 1
        oid = self.order_id
        tid = rng.choices(self.tenants.ids, cum_weights=self.tenants.cum_weights)[0]
        region = self.tenants.region[tid] if rng.random() < 0.7 else rng.choice(W.REGION_NAMES)
        total = rng.randrange(1500, 25000)
        fee = rng.randrange(400, min(1500, total - 100))
        promised = created_us + rng.randrange(35 * MINUTE, 75 * MINUTE)
        tip_from = self.period.tip_from_us
        tip = rng.choice(W.TIP_CENTS) if tip_from is not None and created_us >= tip_from else 0
        t_assign, t_pick, t_transit, t_deliv, t_cancel = _timeline(rng, cfg.cancel_rate, created_us, snap_us)
        base = snap_us if snap_us is not None else created_us
        courier = self.couriers.pick(rng, region, t_assign)
        if courier is None:  # nobody to assign: the customer gives up
            t_cancel = t_cancel if t_cancel is not None and t_cancel < t_assign else max(t_assign, base + MINUTE)
        method = rng.choices(W.PAYMENT_METHODS, W.PAYMENT_METHOD_WEIGHTS)[0]
        row: list[Any] = [oid, tid, None, region, "created", total, fee, created_us, promised, None, created_us]
        route = self._route(region, created_us)
        order = _Order(row, tip, tip_from, route[:4] or (None,) * 4, method, self.faults, self.payment_ids)
        txs: list[Transaction] = []
        # creation (or the snapshot read of an order that already existed)
        failed_first = rng.random() < cfg.failed_payment_rate
        if snap_us is not None:
            if t_assign < snap_us and courier is not None and (t_cancel is None or t_cancel > snap_us):
                row[2], row[4], row[10] = courier, "assigned", t_assign
            read = order.change("r", snap_us, row[10])
            self.snapshot_reads.extend([read, order.new_payment("r", snap_us, total, "authorized")])
        else:
            first = order.new_payment("c", created_us, total, "failed" if failed_first else "authorized")
            txs.append((created_us, [order.change("c", created_us), first], False))
            if failed_first:
                t2 = created_us + rng.randrange(30 * SECOND, 3 * MINUTE)
                txs.append((t2, [order.new_payment("c", t2, total, "authorized")], False))
        if row[4] != "assigned" and courier is not None and (t_cancel is None or t_assign < t_cancel):
            row[2], row[4] = courier, "assigned"
            txs.append((t_assign, [order.change("u", t_assign)], False))
        if t_cancel is not None and (courier is None or t_cancel < t_pick):
            row[4] = "cancelled"
            cancel = order.change("u", t_cancel)
            txs.append((t_cancel, [cancel, order.update_payment(order.payments[-1], t_cancel, "failed")], False))
            end_t = t_cancel
        else:
            self._deliver(order, txs, t_pick, t_transit, t_deliv)
            end_t = t_deliv
        deleted = False
        if rng.random() < cfg.delete_rate:
            t_del = max(t for t, _, _ in txs) + rng.randrange(5 * MINUTE, 2 * HOUR_US) if txs else end_t + HOUR_US
            txs.append((t_del, order.delete(t_del), False))
            deleted = t_del < self.period.end_us
        self.queue.add(txs)
        # the status of its latest change inside the period (its first one always is)
        status = [s for t, s in order.statuses if t < self.period.end_us][-1]
        self.final[oid] = (status, total, deleted)
        if courier is not None and self.trips.interval_us and (t_cancel is None or t_cancel > t_assign):
            t_end = t_deliv if t_cancel is None else t_cancel
            self.trips.plan(courier, oid, region, (t_assign, t_pick, t_transit, t_end), t_cancel is None, route)

    def _route(self, region: str, created_us: int) -> tuple[float, ...]:
        """Pickup, drop-off (lat, lon) and maybe a detour point 3.3 km off their segment, from a stream per order."""
        if self.period.coordinates_from_us is None or created_us < self.period.coordinates_from_us:
            return ()
        _, clat, clon = W.REGIONS[W.REGION_NAMES.index(region)]
        u = Random(f"{self.cfg.seed}:{self.order_id}").random
        a, b, c, d = (round(x + (u() - 0.5) * s, 6) for x, s in ((clat, 0.06), (clon, 0.06), (clat, 0.1), (clon, 0.1)))
        if u() >= 0.12:  # the others (12 %) ride a detour: the off-route monitor's episodes
            return a, b, c, d
        k = math.cos(math.radians(clat))  # degrees of longitude to those of latitude
        n = math.hypot((d - b) * k, c - a) or 1.0
        return a, b, c, d, (a + c) / 2 + 0.03 * (d - b) * k / n, (b + d) / 2 - 0.03 * (c - a) / n / k

    def _deliver(self, order: _Order, txs: list[Transaction], t_pick: int, t_transit: int, t_deliv: int) -> None:
        """Picked up, in transit, delivered and paid (or paid wrongly), maybe charged twice and refunded."""
        rng, row = self.rng, order.row
        total = row[5]
        live_payment = order.payments[-1]
        for t, status in ((t_pick, "picked_up"), (t_transit, "in_transit")):
            row[4] = status
            txs.append((t, [order.change("u", t)], False))
        row[4], row[9] = "delivered", t_deliv
        captured = total
        mismatch = rng.random() < self.cfg.payment_mismatch_rate
        partial_refund = mismatch and rng.random() < 0.5
        if mismatch and not partial_refund:
            captured = total - rng.randrange(1, min(500, total - 1))
        delivered = order.change("u", t_deliv)
        txs.append((t_deliv, [delivered, order.update_payment(live_payment, t_deliv, "captured", captured)], False))
        if rng.random() < self.cfg.refund_rate:  # charged twice, the second charge refunded: still reconciles
            t_dup = t_deliv + rng.randrange(MINUTE, 30 * MINUTE)
            txs.append((t_dup, [order.new_payment("c", t_dup, total, "captured")], False))
            t_ref = t_dup + rng.randrange(HOUR_US, 6 * HOUR_US)
            txs.append((t_ref, [order.new_payment("c", t_ref, total, "refunded")], False))
        if partial_refund:  # goodwill refund: captured - refunded != total (reported, not hidden)
            t_ref = t_deliv + rng.randrange(HOUR_US, 6 * HOUR_US)
            amount = rng.randrange(100, max(101, total // 3))
            txs.append((t_ref, [order.new_payment("c", t_ref, amount, "refunded")], False))
