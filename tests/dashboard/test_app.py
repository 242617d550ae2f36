"""Every page of the dashboard through Streamlit's own app test, on the published operations world and on nothing.

The numbers a page shows are checked against a direct pyiceberg read of the mart it draws; a page must render
without an exception element, its charts present.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta

import pyarrow.compute as pc
import pytest
from streamlit.testing.v1 import AppTest

from logistics_platform.dashboard import APP, PAGES
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.timekeys import hour_start
from logistics_platform.settings import Settings, local_settings
from tests.support.dashboard_world import OFF_COURIER, OFF_ORDER, QUARANTINED_LINES, TRAVEL_DAYS, DashboardWorld

pytestmark = pytest.mark.slow

# A page's first run opens the catalog and scans marts on a shared machine: far above Streamlit's 3 s default.
TIMEOUT = 120


def _run(page: str) -> AppTest:
    at = AppTest.from_file(str(PAGES / f"{page}.py"), default_timeout=TIMEOUT)
    at.run()
    _rendered(at)
    return at


def _rendered(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def _charts(at: AppTest) -> int:
    return len(at.get("vega_lite_chart")) + len(at.get("arrow_vega_lite_chart"))


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


@pytest.fixture
def world(dashboard_world: DashboardWorld, cli_env: Callable[[Settings], None]) -> DashboardWorld:
    cli_env(dashboard_world.settings)
    return dashboard_world


def _scan(world: DashboardWorld, mart: str, snapshot_id: int | None = None):  # type: ignore[no-untyped-def]
    table = load_catalog(world.settings).load_table(f"marts.{mart}")
    return table.scan(snapshot_id=snapshot_id).to_arrow() if snapshot_id else table.scan().to_arrow()


def test_the_app_opens_on_sla_now(world: DashboardWorld) -> None:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    _rendered(at)
    assert [t.value for t in at.title] == ["SLA now"]


def _page_now(at: AppTest) -> datetime:
    """The instant the SLA page took as now (its caption says it to the second)."""
    [caption] = [c.value for c in at.caption if c.value.startswith("Windows of")]
    found = re.search(r"Now (\S+ \S+) UTC", caption)
    assert found, caption
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")


def test_sla_now_opens_on_the_open_hour_and_names_the_breaches_of_ended_windows(world: DashboardWorld) -> None:
    at = _run("sla")
    now = _page_now(at)
    width, hour = timedelta(minutes=world.settings.sla_window_minutes), timedelta(hours=1)
    # The six hours up to the open hour (the clock's), which the world's own open hour is in or just before.
    first, last = at.select_slider[0].value
    assert (first, last) == (hour_start(now) - 5 * hour, hour_start(now))
    assert first <= world.open_hour.hour <= last
    sla = _scan(world, "fct_region_sla").to_pylist()
    shown = [r for r in sla if first <= r["window_start"] < last + hour]
    ended = [r for r in shown if r["window_start"] + width <= now]
    # Breaches newest first: the mart's breached windows that have ended, north's burst among them.
    want = sorted((r for r in ended if r["breached"]), key=lambda r: (-r["window_start"].timestamp(), r["region"]))
    breaches = at.dataframe[0].value
    assert list(zip(breaches["window_start"], breaches["region"], strict=True)) == [
        (r["window_start"], r["region"]) for r in want
    ]
    assert (world.open_hour.breached_window, "north") in [(r["window_start"], r["region"]) for r in want]
    assert _metric(at, "Breached windows shown") == str(len(want))
    [line] = [e.value for e in at.error]
    assert f"north at {world.open_hour.breached_window:%m-%d %H:%M} (75% late of 24)" in line
    # South's burst breaches by the mart's rule; it is no breach while its window is open, and one once it ended.
    [south] = [r for r in sla if (r["window_start"], r["region"]) == (world.open_hour.filling_window, "south")]
    assert south["breached"] and south["deliveries"] == 24
    if south["window_start"] + width > now:
        filling = at.dataframe[1].value
        assert ("south", 24) in list(zip(filling["region"], filling["deliveries"], strict=True))
        assert "south at" not in line
    else:
        assert south in want
    # Overdue now: at the end of each region's newest ended window.
    latest: dict[str, dict] = {}  # type: ignore[type-arg]
    for r in (r for r in sla if r["window_start"] + width <= now):
        if r["region"] not in latest or r["window_start"] > latest[r["region"]]["window_start"]:
            latest[r["region"]] = r
    assert _metric(at, "Orders overdue and open now") == str(sum(r["overdue_open"] for r in latest.values()))
    assert _metric(at, "Regions breached now") == str(sum(r["breached"] for r in latest.values()))
    assert _charts(at) == 2

    # An hour with no window at all (the world's bursts are within the last hour or so): one line saying so.
    assert not [r for r in sla if first <= r["window_start"] < first + hour]
    at.select_slider[0].set_value((first, first)).run()
    _rendered(at)
    [info] = [i.value for i in at.info]
    assert "No delivery and no overdue order in the hours shown" in info
    assert not at.error and _metric(at, "Breached windows shown") == "0"


def test_delivery_time_marks_the_anomalous_day(world: DashboardWorld) -> None:
    at = _run("delivery")
    daily = _scan(world, "fct_region_delivery_daily").to_pylist()
    [anomaly] = [r for r in daily if r["is_anomaly"]]
    [line] = [w.value for w in at.warning]
    assert f"{anomaly['region']} on {anomaly['delivery_date']:%Y-%m-%d}" in line
    assert f"({anomaly['avg_delivery_minutes']:.0f} min" in line
    regions = {r["region"] for r in daily}
    assert len(at.dataframe[0].value) == len(daily) and _charts(at) == len(regions)  # one chart per region
    # Without the anomalous region the page says there is none.
    at.multiselect[0].set_value([r for r in ("north", "east")]).run()
    _rendered(at)
    assert (
        not at.warning
        and at.success
        and len(at.dataframe[0].value) == len(daily) - len([r for r in daily if r["region"] == anomaly["region"]])
    )


def test_off_route_names_the_current_episode_and_maps_its_corridor_and_pings(world: DashboardWorld) -> None:
    at = _run("off_route")
    episodes = _scan(world, "fct_courier_off_route").to_pylist()
    [current] = [e for e in episodes if e["ended_at"] is None]
    assert (current["courier_id"], current["order_id"], current["started_at"]) == (
        OFF_COURIER,
        OFF_ORDER,
        world.off_route_start,
    )
    [line] = [w.value for w in at.warning]
    assert f"courier {OFF_COURIER} on order {OFF_ORDER} since {world.off_route_start:%m-%d %H:%M} UTC" in line
    # The map opens on it; the history lists every episode of the mart (the world's daily detours too).
    assert at.selectbox[0].value.startswith(f"courier {OFF_COURIER}, order {OFF_ORDER}")
    history = at.dataframe[0].value
    assert len(history) == len(episodes) > 1
    assert _charts(at) == 2
    # An ended episode of the history: the map follows the choice.
    ended = next(label for label in at.selectbox[0].options if not label.startswith(f"courier {OFF_COURIER},"))
    at.selectbox[0].set_value(ended).run()
    _rendered(at)
    assert any(s.value.startswith(ended.split(", from")[0].capitalize()) for s in at.subheader)
    assert _charts(at) == 2


def test_revenue_totals_equal_the_mart(world: DashboardWorld) -> None:
    at = _run("revenue")
    revenue = _scan(world, "fct_daily_revenue")
    gross = sum(r["gross_revenue"] for r in revenue.to_pylist())
    assert _metric(at, "Gross revenue") == f"{gross:,.2f}"
    assert _metric(at, "Orders delivered") == f"{pc.sum(revenue['orders_delivered']).as_py():,}"
    per_tenant = at.dataframe[0].value
    for row in per_tenant.to_dict("records"):
        mine = [r for r in revenue.to_pylist() if r["tenant_id"] == row["tenant_id"]]
        assert row["gross_revenue"] == pytest.approx(float(sum(r["gross_revenue"] for r in mine)))
        assert row["tier"] == "silver"
    assert _charts(at) == 2
    # One day only: the metrics follow the range.
    first = min(r["revenue_date"] for r in revenue.to_pylist())
    at.date_input[0].set_value((first, first)).run()
    _rendered(at)
    one_day = sum(r["gross_revenue"] for r in revenue.to_pylist() if r["revenue_date"] == first)
    assert _metric(at, "Gross revenue") == f"{one_day:,.2f}" and one_day < gross


def test_time_travel_compares_today_with_the_tagged_day(world: DashboardWorld) -> None:
    at = _run("time_travel")
    # It opens on the newest daily tag: the world's, TRAVEL_DAYS ago.
    assert at.number_input[0].value == TRAVEL_DAYS
    table = load_catalog(world.settings).load_table("marts.fct_daily_revenue")
    then = table.scan(snapshot_id=table.metadata.refs[world.travel_tag].snapshot_id).to_arrow().num_rows
    now = table.scan().to_arrow().num_rows
    assert then < now
    assert _metric(at, f"Rows {TRAVEL_DAYS} days ago") == f"{then:,}"
    assert _metric(at, "Rows today") == f"{now:,}"
    assert _charts(at) == 1

    at.selectbox[0].set_value("fct_region_sla").run()
    _rendered(at)
    sla = load_catalog(world.settings).load_table("marts.fct_region_sla")
    then_sla = sla.scan(snapshot_id=sla.metadata.refs[world.travel_tag].snapshot_id).to_arrow()
    measures = at.dataframe[0].value.set_index("measure")
    assert measures.loc["count(breached)", "then"] == pc.sum(then_sla["breached"].cast("int64")).as_py()
    assert measures.loc["rows", "now"] == sla.scan().to_arrow().num_rows

    # A day without a tag: one line saying what makes tags, nothing else drawn.
    at.number_input[0].set_value(TRAVEL_DAYS + 2).run()
    _rendered(at)
    [line] = [i.value for i in at.info]
    missing = f"daily-{date.fromordinal(datetime.now(UTC).date().toordinal() - TRAVEL_DAYS - 2).isoformat()}"
    assert missing in line and world.travel_tag in line and "logistics-platform maintain" in line
    assert not at.metric and _charts(at) == 0


def test_pipeline_health_shows_backlog_quarantine_and_every_table(world: DashboardWorld) -> None:
    at = _run("health")
    assert _metric(at, "Hours waiting for ingest") == "1"
    assert _metric(at, "Files waiting") == "1"
    [backlog] = [w.value for w in at.warning]
    assert f"{world.pending_hour:%Y-%m-%d-%H}:00" in backlog
    [quarantine] = [c.value for c in at.caption if "quarantined" in c.value]
    assert quarantine.startswith(f"{QUARANTINED_LINES} of ")
    tables = at.dataframe[0].value
    catalog = load_catalog(world.settings)
    every = sorted(".".join(t) for ns in ("bronze", "marts") for t in catalog.list_tables(ns))
    assert sorted(tables["table"]) == every
    orders = catalog.load_table("bronze.orders")
    row = tables.set_index("table").loc["bronze.orders"]
    assert row["snapshots"] == len(orders.metadata.snapshots)
    assert _charts(at) == 2


@pytest.mark.parametrize("page", ["sla", "delivery", "off_route", "revenue", "time_travel"])
def test_a_page_on_nothing_published_says_what_to_run(
    page: str, tmp_path_factory: pytest.TempPathFactory, cli_env: Callable[[Settings], None]
) -> None:
    cli_env(local_settings(tmp_path_factory.mktemp("empty")))
    at = _run(page)
    [line] = [i.value for i in at.info]
    assert "has no rows yet" in line and "make run" in line
    assert _charts(at) == 0 and not at.dataframe


def test_health_on_nothing_landed_says_what_to_do(
    tmp_path_factory: pytest.TempPathFactory, cli_env: Callable[[Settings], None]
) -> None:
    settings = local_settings(tmp_path_factory.mktemp("empty"))
    cli_env(settings)
    at = _run("health")
    [line] = [i.value for i in at.info]
    assert f"No landed hour in {settings.landing_dir}" in line and _charts(at) == 0
