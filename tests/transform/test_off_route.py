"""marts.fct_courier_off_route equals an independent computation (tests/support/off_route.py) over the landed lines,
and hourly incremental runs in a shuffled order equal a full refresh.

The world: couriers carrying overlapping orders along their pickup -> drop-off corridors, some riding a detour (back
in the corridor before the drop-off, or delivered while still off it), some still off route at the end (an open
episode), a short excursion too brief to count, an order reassigned from one courier to another, and orders made
before the table had coordinates (counted, never guessed); pings and order changes land out of order, late and
redelivered.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.contract import ORDER_COORDINATES
from logistics_platform.lib.transform.project import run_dbt, window_vars
from logistics_platform.settings import Settings, local_settings
from tests.support import ops_oracle
from tests.support.bronze import cdc, dump, iso, order, ping
from tests.support.off_route import KM_PER_DEGREE, Change, Ping, episodes
from tests.support.transform_world import TOPIC_OF, World, write_landing

pytestmark = pytest.mark.slow

START = datetime(2026, 11, 2, 0)
HOURS = 4
# The monitor and what it reads, with their tests (cautious: not the tests that also read other marts).
SELECT = ["--select", "+fct_courier_off_route", "--indirect-selection", "cautious"]
COLUMNS = "courier_id, order_id, started_at, ended_at, minutes, pings, max_distance_km, region"


def build_world(seed: int = 36) -> World:
    """Orders, their changes and their couriers' pings (every 2 minutes), landed with delays and copies."""
    rng = random.Random(seed)
    events: list[tuple[str, datetime, bytes]] = []  # (table, event time, line)
    lsn = 1000

    def change(op: str, at: datetime, row: dict) -> None:
        nonlocal lsn
        lsn += 10
        events.append(("orders", at, dump(cdc(op, "orders", row, lsn=lsn, ts=at))))

    for i in range(30):
        oid, courier, t0 = 100 + i, 1 + i % 6, START + timedelta(minutes=6 * i + rng.randrange(0, 5))
        lat0, lon0 = -23.55 + rng.uniform(-0.03, 0.03), -46.63 + rng.uniform(-0.03, 0.03)
        lat1, lon1 = lat0 + rng.uniform(-0.05, 0.05), lon0 + rng.uniform(-0.05, 0.05)
        xy = {} if i % 5 == 0 else dict(zip(ORDER_COORDINATES, (lat0, lon0, lat1, lon1), strict=True))
        base = {"region": ("north", "south")[i % 2], **xy}
        t_assign, t_pick, t_transit = t0 + timedelta(minutes=2), t0 + timedelta(minutes=8), t0 + timedelta(minutes=12)
        t_done = t_transit + timedelta(minutes=rng.randrange(20, 40))
        still_going = i % 7 == 3  # in transit at the end of the world
        change("c", t0, order(oid, t0, **base))
        if i % 6 == 4:  # first assigned to courier 9, who rides off at once, then reassigned
            change("u", t_assign, order(oid, t0, status="assigned", courier_id=9, **base))
            t_assign += timedelta(minutes=3)
        for status, at in (("assigned", t_assign), ("picked_up", t_pick), ("in_transit", t_transit)):
            change("u", at, order(oid, t0, status=status, courier_id=courier, updated_at=iso(at), **base))
        if not still_going:
            done = order(oid, t0, status="delivered", courier_id=courier, delivered_at=iso(t_done), **base)
            change("u", t_done, done)
        # The courier's route: along the corridor, with a detour 1.5 .. 3 km off it for some, from 40 % of the transit
        # to 80 % (back before the drop-off) or to the end (delivered, or still riding, while off route).
        kind = rng.choice(("straight", "straight", "detour", "detour_to_end", "blip"))
        end = START + timedelta(hours=HOURS) - timedelta(minutes=1) if still_going else t_done
        k = math.cos(math.radians(lat0))
        norm = math.hypot((lon1 - lon0) * k, lat1 - lat0) or 1.0
        off_km = rng.uniform(1.5, 3.0)
        at, n = t_assign - timedelta(minutes=3) if i % 6 == 4 else t_assign, 0
        while at < end:
            f = min(1.0, max(0.0, (at - t_transit) / (t_done - t_transit)))
            lat, lon = lat0 + (lat1 - lat0) * f, lon0 + (lon1 - lon0) * f
            off = (kind == "detour" and 0.4 <= f <= 0.8) or (kind == "detour_to_end" and f >= 0.4)
            off = off or (kind == "blip" and n == 10) or (i % 6 == 4 and at < t_assign)
            if off:
                d = off_km / KM_PER_DEGREE
                lat, lon = lat + d * (lon1 - lon0) * k / norm, lon - d * (lat1 - lat0) / norm / k
            pid = f"{oid:08d}-0000-4000-8000-{n:012d}"
            line = ping(pid, at, courier_id=9 if at < t_assign else courier, order_id=oid, lat=lat, lon=lon)
            events.append(("tracking_pings", at, dump(line)))
            at += timedelta(minutes=2, seconds=rng.randrange(0, 20))
            n += 1

    world = World(hours=[START + timedelta(hours=h) for h in range(HOURS)])
    for table, at, line in events:
        natural = int((at - START).total_seconds() // 3600)
        hour = min(HOURS - 1, natural + (1 if rng.random() < 0.15 else 0))  # some late, out of order
        for h in [hour] + ([min(HOURS - 1, hour + 1)] if rng.random() < 0.05 else []):  # redelivered copies
            world.lines.setdefault((TOPIC_OF[table], START + timedelta(hours=h)), []).append(line)
    for lines in world.lines.values():
        rng.shuffle(lines)  # a file's lines out of time order
    return world


def oracle(landing: Path) -> tuple[set[tuple], int]:
    """The expected rows, from the landed lines (plain Python: tests/support/off_route.py)."""
    changes = [
        Change(
            c.order_id,
            c.lsn,
            c.event_time,
            c.op,
            c.row.get("status"),
            c.row.get("courier_id"),
            c.row.get("region"),
            tuple(c.row[x] for x in ORDER_COORDINATES) if c.row.get("pickup_lat") is not None else None,  # type: ignore[arg-type]
        )
        for c in ops_oracle.order_changes(landing)
    ]
    pings = [Ping(p.ping_id, p.courier_id, p.lat, p.lon, p.recorded_at) for p in ops_oracle.pings(landing)]
    return episodes(changes, pings, km=1.0, minutes=5.0)


def mart_rows(settings: Settings) -> set[tuple]:
    con = duck.connect(settings.duckdb_path, read_only=True)
    try:
        rows = con.sql(f"select {COLUMNS} from marts.fct_courier_off_route").fetchall()
    finally:
        con.close()
    return {(*r[:4], round(r[4], 6), r[5], round(r[6], 6), r[7]) for r in rows}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, list[dict]]:
    settings = local_settings(tmp_path_factory.mktemp("off_route"))
    world = build_world()
    write_landing(world, settings.landing_dir)
    for hour in world.hours:
        ingest_hour(settings, hour)
    # The models, their unit tests and data tests; raises on an error (a warning does not).
    run = run_dbt(settings, ["build", *SELECT], target_path=settings.duckdb_path.parent / "dbt_target")
    return settings, run.results


def test_off_route_episodes_equal_an_independent_computation(built: tuple[Settings, list[dict]]) -> None:
    settings, _ = built
    expected, _missing = oracle(settings.landing_dir)
    assert mart_rows(settings) == expected
    # The cases the world is made of are in it: episodes closed by a return and by the end of the order, open ones.
    closed = [r for r in expected if r[3] is not None]
    assert len(closed) >= 3 and any(r[3] is None for r in expected)
    assert all(r[4] >= 5.0 and r[6] > 1.0 for r in expected)


def test_active_orders_without_coordinates_are_counted_by_a_warning(built: tuple[Settings, list[dict]]) -> None:
    settings, results = built
    _expected, missing = oracle(settings.landing_dir)
    test = next(r for r in results if r["unique_id"] == "test.logistics.assert_active_orders_have_coordinates")
    assert missing >= 4 and (test["status"], test["failures"]) == ("warn", missing)


def test_shuffled_hours_with_a_rerun_equal_full_refresh(built: tuple[Settings, list[dict]], tmp_path: Path) -> None:
    full, _ = built
    settings = local_settings(tmp_path / "incremental")
    write_landing(build_world(), settings.landing_dir)
    hours = [START + timedelta(hours=h) for h in range(HOURS)]
    target = tmp_path / "target"
    for index in (2, 0, 3, 2, 1):
        ingest_hour(settings, hours[index])
        run_dbt(settings, ["build", *SELECT], window=window_vars(hours[index]), target_path=target)
    assert mart_rows(settings) == mart_rows(full)
