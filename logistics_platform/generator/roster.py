"""Tenants and couriers: their rows read by the snapshot, their changes over the period, who can take an order when."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate
from random import Random
from typing import Any

from logistics_platform.generator import encode as E
from logistics_platform.generator import world as W
from logistics_platform.generator.cdc import CommitQueue
from logistics_platform.generator.config import TABLES, GeneratorConfig
from logistics_platform.generator.faults import Faults, encoders
from logistics_platform.generator.model import HOUR_US, MINUTE, SECOND, T_COURIERS, T_TENANTS, Change, Period, link


@dataclass(frozen=True)
class Tenants:
    """The tenants that order: ids, cumulative order weights (the first orders most) and home regions."""

    ids: list[str]
    cum_weights: list[float]
    region: dict[str, str]


@dataclass(frozen=True)
class Couriers:
    """The couriers: vehicles, when each can take an order, and who works where."""

    vehicle: dict[int, str]
    window: dict[int, tuple[int, int]]  # courier -> (available from, available until) for assignments
    by_region: dict[str, list[int]]
    everyone: list[int]
    existing: int  # couriers not deleted by the end

    def pick(self, rng: Random, region: str, t: int) -> int | None:
        """A courier available at ``t``, from the region if possible; None after a few tries."""
        for pool in (self.by_region.get(region) or self.everyone, self.everyone):
            for _ in range(6):
                cid = pool[rng.randrange(len(pool))]
                lo, hi = self.window[cid]
                if lo <= t < hi:
                    return cid
        return None


# The op of a planned tenant or courier change of each kind (every other kind is an update)
_OPS = {"create": "c", "delete": "d"}


@dataclass
class Roster:
    """Plans the tenants and couriers: their rows read by the snapshot at ``snap_us`` (into ``snapshot``) and their
    changes over the period (into ``queue``)."""

    cfg: GeneratorConfig
    period: Period
    rng: Random
    faults: Faults
    queue: CommitQueue
    snap_us: int
    snapshot: list[Change]
    links: dict[Any, Change] = field(default_factory=dict)

    def _change(self, ti: int, op: str, key: Any, before: str, row: list[Any], t: int) -> Change:
        """A change of a tenant or courier row at ``t``, its after image in one change's encodings (a delete: none)."""
        flags = self.faults.encoding_flags()
        after = "null" if op == "d" else E.row(TABLES[ti], row, ts=encoders(flags)[0])
        ch = [ti, op, key, before, after, None, 0 if op == "d" else flags]
        link(self.links, ch, t)
        return ch

    def plan_tenants(self) -> Tenants:
        """Tenant rows read by the snapshot and their changes."""
        cfg, period, rng, snap_us = self.cfg, self.period, self.rng, self.snap_us
        start_us, span = period.start_us, period.end_us - period.start_us
        rows: dict[str, list[Any]] = {}
        names = list(W.TENANT_NAMES)
        op0 = "r" if cfg.snapshot_rate > 0 else "c"  # without a snapshot: created as the period starts
        for i in range(cfg.tenants):
            tid = f"t-{i + 1:03d}"
            name = names[i % len(names)] + ("" if i < len(names) else f" {i // len(names) + 1}")
            tier, region = rng.choice(W.TIERS), rng.choice(W.REGION_NAMES)
            updated = snap_us - rng.randrange(1, 90) * 86400 * SECOND
            rows[tid] = [tid, name, tier, region, updated if op0 == "r" else snap_us]
        tenant_ids = list(rows)
        self.snapshot.extend(self._change(T_TENANTS, op0, tid, "null", rows[tid], snap_us) for tid in tenant_ids)
        plan: list[tuple[int, int, str, str]] = []  # (time, seq, tenant, kind)
        for n in range(cfg.tier_changes):
            plan.append((start_us + rng.randrange(span // 20, span), n, rng.choice(tenant_ids), "tier"))
        for n in range(cfg.noop_updates):
            plan.append((start_us + rng.randrange(span // 20, span), 1000 + n, rng.choice(tenant_ids), "noop"))
        if cfg.tenants > 1 and period.hours >= 6:
            plan.append((start_us + span * 3 // 5 + rng.randrange(HOUR_US), 2000, tenant_ids[0], "rename"))
        if cfg.delete_rate > 0 and period.hours >= 6:
            # A trial tenant that never orders: created, upgraded, then deleted (SCD2 closes on the delete).
            trial = "t-900"
            rows[trial] = [trial, "Loja Teste", "bronze", rng.choice(W.REGION_NAMES), 0]
            plan.append((start_us + span // 5 + rng.randrange(HOUR_US), 3000, trial, "create"))
            plan.append((start_us + span * 2 // 5 + rng.randrange(HOUR_US), 3001, trial, "tier"))
            plan.append((start_us + span * 7 // 10 + rng.randrange(HOUR_US), 3002, trial, "delete"))
        plan.sort()
        for t, _, tid, kind in plan:
            r = rows[tid]
            before = E.row("tenants", r)
            r[4] = t
            if kind == "tier":
                r[2] = rng.choice([x for x in W.TIERS if x != r[2]])
            elif kind == "rename":
                r[1] = r[1] + " Express"
            op = _OPS.get(kind, "u")
            self.queue.add([(t, [self._change(T_TENANTS, op, tid, "null" if op == "c" else before, r, t)], False)])
        return Tenants(
            ids=tenant_ids,
            cum_weights=list(accumulate(1.0 / (i + 1) for i in range(len(tenant_ids)))),
            region={tid: W.REGION_NAMES[(i * 3) % len(W.REGION_NAMES)] for i, tid in enumerate(tenant_ids)},
        )

    def plan_couriers(self) -> Couriers:
        """Courier rows read by the snapshot, couriers joining later and every courier change."""
        cfg, period, rng, snap_us = self.cfg, self.period, self.rng, self.snap_us
        start_us, end_us = period.start_us, period.end_us
        span = end_us - start_us
        n_new = max(1, cfg.couriers // 20) if period.hours >= 6 else 0
        n_del = max(1, round(cfg.couriers * cfg.delete_rate)) if cfg.delete_rate > 0 and period.hours >= 12 else 0
        n_del = min(n_del, max(0, cfg.couriers - 1))
        rows: dict[int, list[Any]] = {}
        window: dict[int, tuple[int, int]] = {}
        by_region: dict[str, list[int]] = {r: [] for r in W.REGION_NAMES}
        plan: list[tuple[int, int, int, str]] = []
        op0 = "r" if cfg.snapshot_rate > 0 else "c"
        for i in range(cfg.couriers + n_new):
            cid = 1001 + i
            name = f"{rng.choice(W.FIRST_NAMES)} {rng.choice(W.LAST_NAMES)}"
            vehicle = rng.choices(W.VEHICLES, W.VEHICLE_WEIGHTS)[0]
            region = W.REGION_NAMES[i % len(W.REGION_NAMES)] if i < len(W.REGION_NAMES) else rng.choice(W.REGION_NAMES)
            by_region[region].append(cid)
            if i < cfg.couriers:
                updated = snap_us if op0 == "c" else snap_us - rng.randrange(1, 400) * 86400 * SECOND
                rows[cid] = [cid, name, region, vehicle, True, updated]
                window[cid] = (start_us - HOUR_US, end_us + HOUR_US)
                self.snapshot.append(self._change(T_COURIERS, op0, cid, "null", rows[cid], snap_us))
            else:
                t = start_us + rng.randrange(span // 10, span * 9 // 10)
                rows[cid] = [cid, name, region, vehicle, True, t]
                window[cid] = (t, end_us + HOUR_US)
                plan.append((t, cid, 0, "create"))
        deleting = rng.sample(range(1001, 1001 + cfg.couriers), n_del)
        for cid in deleting:
            t_del = start_us + rng.randrange(span // 3, span)
            t_off = max(t_del - rng.randrange(2 * HOUR_US, 12 * HOUR_US), start_us + HOUR_US)
            window[cid] = (window[cid][0], t_off - HOUR_US)
            plan.append((t_off, cid, 1, "deactivate"))
            plan.append((max(t_del, t_off + MINUTE), cid, 2, "delete"))
        for cid in range(1001, 1001 + cfg.couriers):
            if cid not in deleting and rng.random() < 0.15:
                t = start_us + rng.randrange(span // 20, span)
                plan.append((t, cid, 3, rng.choice(("vehicle", "noop", "rename"))))
        plan.sort()
        for t, cid, _, kind in plan:
            row = rows[cid]
            row[5] = t
            if kind == "vehicle":
                row[3] = rng.choice([v for v in W.VEHICLES if v != row[3]])
            elif kind == "rename":
                row[1] = row[1] + " Jr"
            elif kind == "deactivate":
                row[4] = False
            op = _OPS.get(kind, "u")
            before = f'{{"courier_id":{cid}}}' if op == "d" else "null"  # REPLICA IDENTITY DEFAULT: no before image
            self.queue.add([(t, [self._change(T_COURIERS, op, cid, before, row, t)], False)])
        working = {r: ids for r, ids in by_region.items() if ids}
        return Couriers(
            vehicle={cid: row[3] for cid, row in rows.items()},  # the last planned vehicle of each
            window=window,
            by_region=working,
            everyone=[c for ids in working.values() for c in ids],
            existing=cfg.couriers + n_new - n_del,
        )
