"""What the dashboard reads, built by the platform's own steps from the operations world (tests/support/ops_world.py).

The world goes through the pipeline's own steps (bronze ingest, dbt, write-audit-publish; not the Dagster jobs around
them, which other tests cover) in two steps: its first days, then the rest. Between them every published
mart gets the daily tag of ``TRAVEL_DAYS`` ago on its snapshot, as the nightly maintenance would have tagged it then
(the pipeline runs in seconds, not days, so the tag is set by hand), which gives the time-travel page two different
states to compare. Two extra things are landed for the health page: a few invalid lines in one hour (quarantine)
and one hour that is never ingested (backlog). Last, the open hour (the arrival hour the world is built in, as a
live sink is still writing it) is landed and published like any other: a burst of late deliveries in north in a
window that has ended (a breach) and one in south in the window still filling when it landed (open, not a breach),
and a courier riding off its order's corridor for the last minutes (a current off-route episode).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from pyiceberg.catalog import Catalog

from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.dashboard.sla import window_of
from logistics_platform.lib.maintenance.tags import tag_name
from logistics_platform.lib.timekeys import hour_start, utc_naive
from logistics_platform.lib.transform.project import MART_MODELS, run_dbt, window_vars
from logistics_platform.lib.transform.publish import publish_marts
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import cdc, dump, iso, order, ping, write_file
from tests.support.ops_world import DAY_HOURS, build_ops_world
from tests.support.transform_world import World, write_landing

TRAVEL_DAYS = 3
# The first FIRST_DAYS days of the world are published (and tagged) before the rest.
FIRST_DAYS = 3
QUARANTINE_TOPIC = "oltp.public.orders"
QUARANTINED_LINES = 3
NO_TESTS = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]
PENDING_LINES = 2
# The open hour's bursts: deliveries per burst, and where their orders and log positions start (past the world's).
BURST = 24
BURST_ORDER_ID = 900_000
BURST_LSN = 90_000_000
OPEN_HOUR_OFFSET = 700_000
SECOND, MINUTE = timedelta(seconds=1), timedelta(minutes=1)
# The current off-route episode: its courier and order (outside the world's), the corridor, and how far east it rides.
OFF_COURIER, OFF_ORDER = 42, 950_000
CORRIDOR = {"pickup_lat": -23.60, "pickup_lon": -46.70, "dropoff_lat": -23.58, "dropoff_lon": -46.70}
DETOUR_LON = 0.03  # about 3 km
PINGS_TOPIC = "logistics.tracking_pings"


def publish_hours(settings: Settings, catalog: Catalog, hours: list[datetime], target: Path) -> None:
    """Ingest ``hours``, build the models over their window (no tests: the transform tests run them) and publish."""
    for hour in hours:
        ingest_hour(settings, hour)
    run_dbt(settings, ["build", *NO_TESTS], window=window_vars(hours[0], hours[-1]), target_path=target)
    con = connect(settings.duckdb_path, read_only=True)
    try:
        publish_marts(catalog, con)
    finally:
        con.close()


@dataclass(frozen=True)
class OpenHour:
    """What was landed into the open hour: when, and the windows of its two bursts."""

    landed_at: datetime
    hour: datetime
    breached_window: datetime  # north; it had ended when landed
    filling_window: datetime  # south; the window ``landed_at`` fell in


def land_open_hour(landing: Path, now: datetime, window: timedelta) -> OpenHour:
    """The bursts of the open hour as a sink lands them by ``now``: every change at or before ``now``."""
    filling = window_of(now, window)
    breached = filling - window
    # North: 5 s into its window and 10 s apart, promised 1 min in: 18 of 24 late.
    north = [("north", breached, breached + MINUTE, breached + (10 * i + 5) * SECOND) for i in range(BURST)]
    # South: spread over what has passed of the filling window, all after their promise.
    south = [("south", filling, filling - MINUTE, filling + (now - filling) * i / BURST) for i in range(BURST)]
    lines = []
    for n, (region, window_start, promised, at) in enumerate(north + south):
        oid, created = BURST_ORDER_ID + n, window_start - 50 * MINUTE
        row = order(oid, created, region=region, courier_id=1 + n % 12, promised_at=iso(promised))
        lines.append(dump(cdc("c", "orders", row, lsn=BURST_LSN + 10 * n, ts=created)))
        row = {**row, "status": "delivered", "delivered_at": iso(at), "updated_at": iso(at)}
        lines.append(dump(cdc("u", "orders", row, lsn=BURST_LSN + 10 * n + 5, ts=at)))
    hour = hour_start(now)
    write_file(landing, QUARANTINE_TOPIC, hour, 0, OPEN_HOUR_OFFSET, lines)
    return OpenHour(now, hour, breached, filling)


def land_off_route(landing: Path, now: datetime) -> datetime:
    """An order in transit with OFF_COURIER since 20 min before ``now`` and its pings, one a minute: three in the
    corridor, then the rest DETOUR_LON east of it until a minute ago. Returns the episode's start."""
    created = now - 20 * MINUTE
    row = order(OFF_ORDER, created, courier_id=OFF_COURIER, promised_at=iso(now + 2 * timedelta(hours=1)), **CORRIDOR)
    changes = [
        ("c", "created", created),
        ("u", "assigned", created + MINUTE),
        ("u", "in_transit", created + 3 * MINUTE),
    ]
    lines = [
        dump(cdc(op, "orders", {**row, "status": status, "updated_at": iso(at)}, lsn=BURST_LSN - 100 + n, ts=at))
        for n, (op, status, at) in enumerate(changes)
    ]
    first = created + 4 * MINUTE
    pings = []
    for k in range(16):
        at, off = first + k * MINUTE, k >= 3
        lat = CORRIDOR["pickup_lat"] + 0.001 * k
        lon = CORRIDOR["pickup_lon"] + (DETOUR_LON if off else 0.0)
        pings.append(dump(ping(f"off-{k:04d}", at, courier_id=OFF_COURIER, order_id=OFF_ORDER, lat=lat, lon=lon)))
    hour = hour_start(now)
    write_file(landing, QUARANTINE_TOPIC, hour, 1, OPEN_HOUR_OFFSET, lines)
    write_file(landing, PINGS_TOPIC, hour, 0, OPEN_HOUR_OFFSET, pings)
    return first + 3 * MINUTE


@dataclass(frozen=True)
class DashboardWorld:
    settings: Settings
    world: World
    travel_tag: str
    quarantine_hour: datetime
    pending_hour: datetime
    open_hour: OpenHour
    off_route_start: datetime  # the current episode's first off-route ping (OFF_COURIER, OFF_ORDER)


def build_dashboard_world(root: Path, today: date | None = None) -> DashboardWorld:
    """Land, ingest, transform and publish the operations world under ``root``; tag the first publish."""
    settings = local_settings(root)
    world = build_ops_world()
    write_landing(world, settings.landing_dir)
    quarantine_hour = world.hours[len(DAY_HOURS)]
    # Offsets far past the world's own files: a second file of that hour, read in the same ingest.
    bad = [b"{not json", b'{"payload": 1}', b"[]"][:QUARANTINED_LINES]
    write_file(settings.landing_dir, QUARANTINE_TOPIC, quarantine_hour, 1, 900_000, bad)

    split = FIRST_DAYS * len(DAY_HOURS)
    catalog = load_catalog(settings)
    target = root / "dbt_target"
    publish_hours(settings, catalog, world.hours[:split], target)
    day = (today or datetime.now(UTC).date()) - timedelta(days=TRAVEL_DAYS)
    tag = tag_name(day)
    for mart in MART_MODELS:
        table = catalog.load_table(f"marts.{mart}")
        snapshot = table.current_snapshot()
        assert snapshot is not None, mart
        table.manage_snapshots().create_tag(snapshot.snapshot_id, tag).commit()

    publish_hours(settings, catalog, world.hours[split:], target)

    # Landed after the last run (redelivered copies of the last hour's changes): the backlog the health page shows.
    pending_hour = world.hours[-1] + timedelta(hours=1)
    copies = world.lines[(QUARANTINE_TOPIC, world.hours[-1])][:PENDING_LINES]
    write_file(settings.landing_dir, QUARANTINE_TOPIC, pending_hour, 0, 800_000, copies)

    # Real time: the hour the clock is in now, landed and published while it is still open.
    now = utc_naive(datetime.now(UTC))
    opened = land_open_hour(settings.landing_dir, now, timedelta(minutes=settings.sla_window_minutes))
    off_route_start = land_off_route(settings.landing_dir, now)
    publish_hours(settings, catalog, [opened.hour], target)
    return DashboardWorld(settings, world, tag, quarantine_hour, pending_hour, opened, off_route_start)
