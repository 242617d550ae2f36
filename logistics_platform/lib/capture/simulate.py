"""A realistic stream of OLTP transactions against the contract's tables (``oltp-simulate``, docs/capture.md).

State is read back from the database first, so runs continue one another. Seeded: the same seed on the same database
state makes the same statements (times come from the server's clock).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from logistics_platform.lib import contract
from logistics_platform.lib.capture.schema import TABLES, create_schema

REGIONS = ("north", "south", "east", "west", "central")
NEXT_STATUS = {"created": "assigned", "assigned": "picked_up", "picked_up": "in_transit", "in_transit": "delivered"}
INITIAL_TENANTS = 8
INITIAL_COURIERS = 20


@dataclass
class SimulationResult:
    transactions: int = 0
    changes: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def render(self) -> str:
        kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(self.by_kind.items()))
        return f"oltp-simulate: {self.changes:,} changes in {self.transactions:,} transactions ({kinds})"


class _World:
    def __init__(self, cur: Any) -> None:
        cur.execute("select tenant_id, tier from tenants order by tenant_id")
        self.tenants: dict[str, str] = dict(cur.fetchall())
        cur.execute("select courier_id from couriers order by courier_id")
        self.couriers: list[int] = [r[0] for r in cur.fetchall()]
        cur.execute(
            "select o.order_id, o.status, o.total_amount,"
            " (select min(p.payment_id) from payments p where p.order_id = o.order_id)"
            " from orders o where o.status not in ('delivered', 'cancelled') order by o.order_id"
        )
        self.open: dict[int, tuple[str, Any, int | None]] = {r[0]: (r[1], r[2], r[3]) for r in cur.fetchall()}
        cur.execute("select order_id from orders where status = 'delivered' order by order_id desc limit 200")
        self.delivered: list[int] = [r[0] for r in cur.fetchall()]
        cur.execute("select order_id from orders where status = 'cancelled' order by order_id")
        self.cancelled: list[int] = [r[0] for r in cur.fetchall()]
        cur.execute(
            "select coalesce(max(order_id), 0), (select coalesce(max(payment_id), 0) from payments) from orders"
        )
        self.next_order, self.next_payment = (int(x) + 1 for x in cur.fetchone())
        self.next_courier = max(self.couriers, default=0) + 1
        self.refundable: list[int] = []  # second charges waiting for their refund
        self.tier_changed: dict[str, float] = {}


# The statements, by what they do; ``now`` is the server's clock_timestamp().
_NOW = "clock_timestamp()"
INSERT_TENANT = f"insert into tenants values (%s, %s, %s, %s, {_NOW})"
INSERT_COURIER = f"insert into couriers values (%s, %s, %s, %s, true, {_NOW})"
INSERT_ORDER = (
    f"insert into orders values (%s, %s, null, %s, 'created', %s, %s, {_NOW}, {_NOW} + interval '45 minutes', null,"
    f" {_NOW})"
)
# The orders' coordinates, added part way (by name: the table may have gained other columns before them).
ADD_COORDINATES = "alter table orders " + ", ".join(f"add if not exists {c} float8" for c in contract.ORDER_COORDINATES)
_AT = ", ".join((*TABLES["orders"], *contract.ORDER_COORDINATES))
INSERT_ORDER_AT = INSERT_ORDER.replace("orders values", f"orders ({_AT}) values")[:-1] + ", %s, %s, %s, %s)"
INSERT_PAYMENT = f"insert into payments values (%s, %s, %s, %s, 'authorized', {_NOW}, {_NOW})"
SET_ORDER_STATUS = f"update orders set status = %s, updated_at = {_NOW} where order_id = %s"
ASSIGN_ORDER = f"update orders set status = 'assigned', courier_id = %s, updated_at = {_NOW} where order_id = %s"
DELIVER_ORDER = (
    f"update orders set status = 'delivered', delivered_at = {_NOW}, updated_at = {_NOW} where order_id = %s"
)
SET_PAYMENT_STATUS = f"update payments set status = %s, updated_at = {_NOW} where payment_id = %s"
CHARGE_TWICE = (
    f"insert into payments select %s, order_id, amount, method, 'captured', {_NOW}, {_NOW} from payments"
    " where order_id = %s and status = 'captured' limit 1"
)
SET_TIER = f"update tenants set tier = %s, updated_at = {_NOW} where tenant_id = %s"
UPDATE_COURIER = f"update couriers set active = not active, vehicle = %s, updated_at = {_NOW} where courier_id = %s"

Statement = tuple[str, tuple[Any, ...]]


def simulate(conn: Any, changes: int, seed: int = 7, coordinates_after: int | None = None) -> SimulationResult:
    """Create the schema when missing, then apply about ``changes`` row changes (see ``--coordinates-after``)."""
    create_schema(conn)
    rng = random.Random(seed)
    result = SimulationResult()
    with conn.cursor() as cur:
        cur.execute("set synchronous_commit = off")  # a simulator: losing its last commits on a crash is fine
        w, xy = _World(cur), False  # xy: new orders carry coordinates (from --coordinates-after on)

        def run(kind: str, statements: list[Statement]) -> None:
            for sql, params in statements:
                cur.execute(sql, params)
            conn.commit()
            result.transactions += 1
            result.changes += len(statements)
            result.by_kind[kind] = result.by_kind.get(kind, 0) + len(statements)

        if not w.tenants:
            stmts: list[Statement] = []
            for i in range(1, INITIAL_TENANTS + 1):
                tid, tier = f"t{i:03d}", rng.choice(contract.TIERS)
                w.tenants[tid] = tier
                stmts.append((INSERT_TENANT, (tid, f"Tenant {i}", tier, rng.choice(REGIONS))))
            run("tenant_insert", stmts)
        if not w.couriers:
            run("courier_insert", [_new_courier(w, rng) for _ in range(INITIAL_COURIERS)])

        while result.changes < changes:
            if not xy and coordinates_after is not None and result.changes >= coordinates_after:
                cur.execute(ADD_COORDINATES)  # idempotent: a database that has them keeps them
                conn.commit()
                xy = True
            roll = rng.random()
            if roll < 0.30 or not w.open:
                oid, pid = w.next_order, w.next_payment
                w.next_order, w.next_payment = oid + 1, pid + 1
                total = rng.randrange(1000, 40000) / 100
                tid = rng.choice(sorted(w.tenants))
                w.open[oid] = ("created", total, pid)
                args: tuple[Any, ...] = (oid, tid, rng.choice(REGIONS), total, rng.randrange(300, 1500) / 100)
                if xy:  # around São Paulo's centre, six decimals as a phone reports them
                    args += tuple(round(c + rng.uniform(-0.05, 0.05), 6) for c in (-23.55, -46.63, -23.55, -46.63))
                order = (INSERT_ORDER_AT if xy else INSERT_ORDER, args)
                run("order_created", [order, (INSERT_PAYMENT, (pid, oid, total, rng.choice(contract.PAYMENT_METHODS)))])
            elif roll < 0.80:
                oid = rng.choice(sorted(w.open))
                status, total, live_pid = w.open[oid]
                cancel = status in ("created", "assigned") and rng.random() < 0.08
                new = "cancelled" if cancel else NEXT_STATUS[status]
                if new in ("cancelled", "delivered"):  # the order closes, and its payment with it
                    del w.open[oid]
                    (w.cancelled if cancel else w.delivered).append(oid)
                    stmts = [(SET_ORDER_STATUS, (new, oid)) if cancel else (DELIVER_ORDER, (oid,))]
                    if live_pid is not None:
                        stmts.append((SET_PAYMENT_STATUS, ("failed" if cancel else "captured", live_pid)))
                    run(f"order_{new}", stmts)
                elif new == "assigned":
                    if not w.couriers:
                        run("courier_insert", [_new_courier(w, rng)])
                    run("order_status", [(ASSIGN_ORDER, (rng.choice(w.couriers), oid))])
                    w.open[oid] = (new, total, live_pid)
                else:
                    run("order_status", [(SET_ORDER_STATUS, (new, oid))])
                    w.open[oid] = (new, total, live_pid)
            elif roll < 0.85 and w.delivered:
                # Charged twice: the second charge is captured now and refunded in a later transaction.
                oid = rng.choice(w.delivered)
                pid = w.next_payment
                w.next_payment += 1
                w.refundable.append(pid)
                run("payment_double_charge", [(CHARGE_TWICE, (pid, oid))])
            elif roll < 0.89 and w.refundable:
                run("payment_refunded", [(SET_PAYMENT_STATUS, ("refunded", w.refundable.pop(0)))])
            elif roll < 0.91:
                tid = rng.choice(sorted(w.tenants))
                tier = rng.choice([t for t in contract.TIERS if t != w.tenants[tid]])
                w.tenants[tid] = tier
                # Event time has millisecond precision: two versions of a tenant within one would tie.
                wait = 0.002 - (time.monotonic() - w.tier_changed.get(tid, -1.0))
                if wait > 0:
                    time.sleep(wait)
                run("tenant_tier", [(SET_TIER, (tier, tid))])
                w.tier_changed[tid] = time.monotonic()
            elif roll < 0.93:
                run("courier_insert", [_new_courier(w, rng)])
            elif roll < 0.95 and w.couriers:
                cid = rng.choice(w.couriers)
                run("courier_update", [(UPDATE_COURIER, (rng.choice(contract.VEHICLES), cid))])
            elif roll < 0.97 and len(w.couriers) > 5:
                cid = w.couriers.pop(rng.randrange(len(w.couriers)))
                run("courier_delete", [("delete from couriers where courier_id = %s", (cid,))])
            elif w.cancelled:
                # Purge a cancelled order and its payments (a hard delete).
                oid = w.cancelled.pop(rng.randrange(len(w.cancelled)))
                purge = [(f"delete from {t} where order_id = %s", (oid,)) for t in ("payments", "orders")]
                run("order_delete", purge)
    return result


def _new_courier(w: _World, rng: random.Random) -> Statement:
    cid = w.next_courier
    w.couriers.append(cid)
    w.next_courier += 1
    return (INSERT_COURIER, (cid, f"Courier {cid}", rng.choice(REGIONS), rng.choice(contract.VEHICLES)))
