"""Courier GPS pings: trips planned as runs of pings, expanded by Arrow kernels (docs/internals/generator.md, Speed)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import accumulate
from random import Random
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from logistics_platform.generator import encode as E
from logistics_platform.generator import world as W
from logistics_platform.generator.config import GeneratorConfig
from logistics_platform.generator.faults import Faults
from logistics_platform.generator.model import MINUTE, SECOND, Period
from logistics_platform.generator.roster import Couriers
from logistics_platform.generator.summary import TopicStats

PING_BATCH = 65_536  # pings expanded per batch of Arrow kernels
# A run: pings k0 .. k0+count-1 of a trip on one segment (s0 .. s0+dur, from la0/lo0 by dlat/dlon), cut at t_stop;
# then the trip's fields: arrival_base >= 0 when the phone uploads them late (late_kind 1 within L, 2 beyond).
RUN_FIELDS = (
    *("count", "k0", "t_stop", "s0", "dur", "la0", "lo0", "dlat", "dlon", "oid", "moving"),
    *("t0", "speed0", "cid", "part", "arrival_base", "late_kind"),
)


def ping_interval_us(cfg: GeneratorConfig) -> int:
    """Microseconds between two pings of a phone on a trip, sized so trips yield ``pings_per_day``; 0: no pings."""
    if cfg.pings_per_day > 0 and cfg.orders_per_day > 0:
        per_day_trip_s = cfg.orders_per_day * (1 - cfg.cancel_rate) * W.MEAN_TRIP_SECONDS
        return max(SECOND // 10, int(per_day_trip_s / cfg.pings_per_day * SECOND))
    return 0


class Trips:
    """The pings of courier trips: planned as runs when an order is planned, expanded to rows hour by hour."""

    def __init__(
        self, cfg: GeneratorConfig, period: Period, rng: Random, stats: TopicStats, faults: Faults, couriers: Couriers
    ) -> None:
        self.period = period
        self.rng = rng
        self.stats = stats  # the pings'
        self.faults = faults
        self.couriers = couriers
        self.partitions = cfg.partitions["tracking_pings"]
        self.interval_us = ping_interval_us(cfg)
        self.runs: list[tuple[Any, ...]] = []  # planned pings not yet expanded to rows

    def plan(
        self, cid: int, oid: int, region: str, times: tuple[int, ...], done: bool, route: tuple[float, ...]
    ) -> None:
        """Pings of one courier's trip for order ``oid`` (assigned, picked up, in transit, done), along ``route``."""
        rng, period = self.rng, self.period
        t0, t_pick, t_transit, t_end = times
        _, clat, clon = W.REGIONS[W.REGION_NAMES.index(region)]
        u = rng.random
        start_lat, start_lon = clat + (u() - 0.5) * 0.06, clon + (u() - 0.5) * 0.06
        pick_lat, pick_lon = clat + (u() - 0.5) * 0.06, clon + (u() - 0.5) * 0.06
        drop_lat, drop_lon = clat + (u() - 0.5) * 0.1, clon + (u() - 0.5) * 0.1
        t_back = t_end + rng.randrange(3 * MINUTE, 10 * MINUTE) if done else t_end
        if route:  # dispatched from near the pickup (its corridor)
            pick_lat, pick_lon, drop_lat, drop_lon = route[:4]
            start_lat, start_lon = pick_lat + (start_lat - clat) / 10, pick_lon + (start_lon - clon) / 10
        t_via, via = ((t_transit + t_end) // 2, route[4:]) if len(route) > 4 else (t_end, (drop_lat, drop_lon))
        # segments: (from, until, from lat/lon, to lat/lon, order id, moving)
        segs: list[tuple[Any, ...]] = [
            (t0, t_pick, start_lat, start_lon, pick_lat, pick_lon, oid, True),
            (t_pick, t_transit, pick_lat, pick_lon, pick_lat, pick_lon, oid, False),
            (t_transit, t_via, pick_lat, pick_lon, *via, oid, True),  # by way of a detour point, if any
            (t_via, t_end, *via, drop_lat, drop_lon, oid, True),
        ]
        if done:
            segs.append((t_end, t_back, drop_lat, drop_lon, clat, clon, None, True))
        t_stop = min(t_back, period.end_us)
        t0 = max(t0, period.start_us)  # a snapshot order's courier may have left before the period starts
        iv = self.interval_us
        if t0 >= t_stop:
            return
        speed0 = W.VEHICLE_SPEED_KMH[self.couriers.vehicle[cid]]
        arrival_base, late_kind = self.faults.offline_upload(t0, t_stop)
        # ping k of the trip is recorded at t0 + k*iv + jitter; each segment becomes one run, expanded in expand()
        trip = (t0, speed0, cid, cid % self.partitions, arrival_base, late_kind)
        for s0, s1, la0, lo0, la1, lo1, seg_oid, moving in segs:
            hi_t = min(s1, t_stop)
            k0 = -(-(max(s0, t0) - t0) // iv)  # the pings from the segment's start (or the trip's) to hi_t
            k1 = -(-(hi_t - t0) // iv)
            if k1 <= k0:
                continue
            dur = max(1, s1 - s0)
            self.runs.append((k1 - k0, k0, hi_t, s0, dur, la0, lo0, la1 - la0, lo1 - lo0, seg_oid, moving, *trip))

    def batches(self) -> Iterator[list[tuple[Any, ...]]]:
        """The runs planned so far, taken out in batches of about PING_BATCH pings (small enough for the caches)."""
        runs, self.runs = self.runs, []
        i = total = 0
        for j, run in enumerate(runs):
            total += run[0]
            if total >= PING_BATCH:
                yield runs[i : j + 1]
                i, total = j + 1, 0
        if i < len(runs):
            yield runs[i:]

    def expand(self, runs: list[tuple[Any, ...]]) -> pa.Table:
        """Rows of a batch of runs: times, positions, speeds, ids, arrival (network delay or offline upload) and a
        ``dice`` column in [0, 1) that picks the rows to copy; counts the pings and the late uploads."""
        rng = self.rng
        counts = [r[0] for r in runs]
        n = sum(counts)
        # Run index and ping number k of every ping, by Arrow kernels (two Python lists of n ints cost more):
        # the runs as lists over n slots give each slot its run; position - run start + k0 gives k.
        starts = [0, *accumulate(counts)]
        run_idx = pc.list_parent_indices(pa.ListArray.from_arrays(pa.array(starts, pa.int32()), pa.nulls(n, pa.int8())))
        position = pc.subtract(pc.cumulative_sum(pc.fill_null(pa.nulls(n, pa.int64()), 1)), 1)
        k0_minus_start = pa.array([r[1] - s for r, s in zip(runs, starts, strict=False)], pa.int64())
        k = pc.add(position, k0_minus_start.take(run_idx))
        per_run = pa.table(
            {name: pa.array(list(values)) for name, values in zip(RUN_FIELDS, zip(*runs, strict=True), strict=True)}
        ).take(run_idx)
        col = per_run.column

        def rand() -> pa.Array:
            return pc.random(n, initializer=rng.getrandbits(62))

        iv = self.interval_us
        end_us = self.period.end_us
        t = pc.add(pc.add(col("t0"), pc.multiply(k, iv)), pc.cast(pc.floor(pc.multiply(rand(), iv // 3)), pa.int64()))
        keep = pc.and_(pc.less(t, col("t_stop")), pc.less(t, end_us))
        frac = pc.divide(pc.cast(pc.subtract(t, col("s0")), pa.float64()), pc.cast(col("dur"), pa.float64()))
        noise = 4096 * 1e-7
        lat = pc.add(pc.add(col("la0"), pc.multiply(col("dlat"), frac)), pc.multiply(pc.subtract(rand(), 0.5), noise))
        lon = pc.add(pc.add(col("lo0"), pc.multiply(col("dlon"), frac)), pc.multiply(pc.subtract(rand(), 0.5), noise))
        u_speed = rand()
        speed = pc.if_else(
            col("moving"),
            pc.abs(pc.add(col("speed0"), pc.multiply(pc.subtract(u_speed, 0.5), 20.0))),
            pc.divide(pc.floor(pc.multiply(u_speed, 16)), 10.0),
        )
        online = pc.less(col("arrival_base"), 0)
        arrival = pc.if_else(
            online,
            pc.add(t, pc.cast(pc.floor(pc.add(pc.multiply(rand(), 19_500_000), 500_000)), pa.int64())),
            pc.add(col("arrival_base"), pc.multiply(k, 20_000)),
        )
        arrival = pc.min_element_wise(arrival, end_us - 1)
        rows = pa.table(
            {
                "arrival": arrival,
                "part": col("part"),
                "t": t,
                "cid": col("cid"),
                "oid": col("oid"),
                "lat": lat,
                "lon": lon,
                "speed": speed,
                "pid": E.uuid4_column(Random(rng.getrandbits(62)).randbytes(16 * n)),
                "dice": rand(),
                "late_kind": col("late_kind"),
            }
        ).filter(keep)
        st = self.stats
        st.events += rows.num_rows
        late = {item["values"]: item["counts"] for item in pc.value_counts(rows.column("late_kind")).to_pylist()}
        st.late_within_injected += late.get(1, 0)
        st.late_beyond_injected += late.get(2, 0)
        return rows.drop_columns(["late_kind"])
