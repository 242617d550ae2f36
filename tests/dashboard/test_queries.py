"""lib.dashboard's frames on small hand-made marts: the rules the pages rely on, each case in a few rows."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.ingest_log import IngestLogEntry
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.dashboard.health import health_frame, quarantine_by_hour
from logistics_platform.lib.dashboard.off_route import MARGIN, episodes_view, read_corridor, read_pings
from logistics_platform.lib.dashboard.operations import delivery_view, revenue_by_tenant, revenue_by_tier
from logistics_platform.lib.dashboard.reader import MartState, load_table
from logistics_platform.lib.dashboard.travel import compare, day_column, measures, missing_tag_message, travel_tag
from logistics_platform.lib.maintenance.health import TableHealth
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.settings import local_settings
from tests.support.bronze import cdc, dump, order, ping, write_file

T0 = datetime(2026, 11, 2, 10, 0)


def test_delivery_view_band_is_three_baseline_deviations() -> None:
    daily = pa.table(
        {
            "delivery_date": pa.array([date(2026, 11, 5), date(2026, 11, 4)]),
            "region": ["north", "north"],
            "deliveries": [10, 12],
            "avg_delivery_minutes": [90.0, 30.0],
            "baseline_days": [3, 2],
            "baseline_avg_minutes": [30.0, None],
            "baseline_stddev_minutes": [2.0, None],
            "is_anomaly": [True, False],
        }
    )
    frame = delivery_view(daily)
    assert list(frame["delivery_date"]) == [date(2026, 11, 4), date(2026, 11, 5)]
    assert (frame["band_low"].iloc[1], frame["band_high"].iloc[1]) == (24.0, 36.0)
    assert frame["band_low"].isna().iloc[0]  # no baseline yet: no band


def _revenue(rows: list[tuple[date, str, int, str]]) -> pa.Table:
    money = pa.decimal128(12, 2)
    gross = [Decimal(r[3]) for r in rows]
    return pa.table(
        {
            "revenue_date": pa.array([r[0] for r in rows]),
            "tenant_id": [r[1] for r in rows],
            "orders_delivered": pa.array([r[2] for r in rows], pa.int64()),
            "gross_revenue": pa.array(gross, money),
            "courier_revenue": pa.array([Decimal("1.00")] * len(rows), money),
            "platform_revenue": pa.array([g / 10 for g in gross], money),
            "tenant_revenue": pa.array([g - Decimal("1.00") - g / 10 for g in gross], money),
        }
    )


def test_revenue_takes_the_tier_current_at_the_end_of_each_day() -> None:
    tenants = pa.table(
        {
            "tenant_id": ["t-1", "t-1", "t-2"],
            "name": ["One", "One", "Two"],
            "tier": ["silver", "gold", "bronze"],
            "region": ["north"] * 3,
            "valid_from": pa.array([datetime(2026, 10, 1), datetime(2026, 11, 3, 12), datetime(2026, 10, 1)]),
            "valid_to": pa.array([datetime(2026, 11, 3, 12), None, None], pa.timestamp("us")),
            "is_current": [False, True, True],
        }
    )
    revenue = _revenue(
        [
            (date(2026, 11, 2), "t-1", 2, "100.00"),
            (date(2026, 11, 3), "t-1", 1, "50.00"),  # the tier changed at noon: the day closes gold
            (date(2026, 11, 3), "t-2", 3, "30.00"),
            (date(2026, 11, 3), "t-9", 1, "10.00"),  # no version: shown, as unknown
        ]
    )
    frame = revenue_by_tier(revenue, tenants)
    assert list(zip(frame["tenant_id"], frame["tier"], strict=True)) == [
        ("t-1", "silver"),
        ("t-1", "gold"),
        ("t-2", "bronze"),
        ("t-9", "unknown"),
    ]
    assert frame["gross_revenue"].sum() == 190.0
    totals = revenue_by_tenant(frame)
    assert list(totals["tenant_id"]) == ["t-1", "t-2", "t-9"]
    assert totals.iloc[0][["tenant_name", "tier", "orders_delivered", "gross_revenue"]].tolist() == [
        "One",
        "gold",
        3,
        150.0,
    ]


def test_measures_sum_amounts_count_flags_and_skip_identifiers() -> None:
    rows = pa.table(
        {
            "order_id": [1, 2, 3],
            "last_lsn": [10, 20, 30],
            "delivered_at": pa.array([datetime(2026, 11, 2, 9), datetime(2026, 11, 2, 23), datetime(2026, 11, 3)]),
            "total_amount": pa.array([Decimal("1.50"), Decimal("2.50"), None], pa.decimal128(12, 2)),
            "is_on_time": [True, False, True],
        }
    )
    assert measures(rows) == {"rows": 3.0, "sum(total_amount)": 4.0, "count(is_on_time)": 2.0}
    assert day_column(rows.schema) == "delivered_at"


def test_compare_lines_up_both_states_per_measure_and_day() -> None:
    def state(days: list[date], amounts: list[str]) -> MartState:
        rows = pa.table(
            {
                "revenue_date": pa.array(days),
                "gross_revenue": pa.array([Decimal(a) for a in amounts], pa.decimal128(12, 2)),
            }
        )
        return MartState("marts.x", 1, None, rows)

    then = state([date(2026, 11, 2)], ["10.00"])
    now = state([date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 3)], ["10.00", "5.00", "1.00"])
    result = compare("daily-2026-11-02", then, now)
    by_measure = result.measures.set_index("measure")
    assert by_measure.loc["rows"].tolist() == [1.0, 3.0, 2.0]
    assert by_measure.loc["sum(gross_revenue)"].tolist() == [10.0, 16.0, 6.0]
    per_day = {(str(r.day.date()), r.state): r.rows for r in result.by_day.itertuples()}
    assert per_day == {
        ("2026-11-02", "then: daily-2026-11-02"): 1,
        ("2026-11-02", "now"): 1,
        ("2026-11-03", "now"): 2,
    }


def test_travel_tag_and_the_missing_tag_line() -> None:
    assert travel_tag(date(2026, 12, 1), 30) == "daily-2026-11-01"
    line = missing_tag_message("fct_orders", "daily-2026-11-01", ["daily-2026-11-29", "daily-2026-11-28"])
    assert "\n" not in line and "daily-2026-11-29" in line and "logistics-platform maintain" in line
    assert "no daily tag yet" in missing_tag_message("fct_orders", "daily-2026-11-01", [])


def test_quarantine_rate_per_hour_over_all_topics() -> None:
    logged = [("a", "2026-11-02-10:00", 90, 4), ("b", "2026-11-02-10:00", 10, 1), ("a", "2026-11-02-11:00", 0, 0)]
    ingested = {(t, h): IngestLogEntry(t, h, "", (), n, n - q, q, 0) for t, h, n, q in logged}
    frame = quarantine_by_hour(ingested)
    assert frame[["lines", "quarantined"]].values.tolist() == [[100, 5], [0, 0]]
    assert frame["quarantine_rate"].tolist() == [0.05, 0.0]  # an hour of no lines is no quarantine, not NaN


def test_health_frame_has_one_row_per_table() -> None:
    frame = health_frame([TableHealth("bronze.orders", snapshots=3, data_files=4, data_bytes=2**21)])
    assert frame.to_dict("records") == [
        {
            "table": "bronze.orders",
            "snapshots": 3,
            "data_files": 4,
            "data_mib": 2.0,
            "small_file_share": 0.0,
            "manifests": 0,
            "orphan_files": 0,
            "orphan_mib": 0.0,
        }
    ]


def test_an_empty_catalog_reads_as_nothing_published(tmp_path: Path) -> None:
    catalog = load_catalog(local_settings(tmp_path))
    assert load_table(catalog, "marts.fct_region_sla") is None
    assert read_ingest_log(catalog) == {}
    assert quarantine_by_hour(read_ingest_log(catalog)).empty


def test_episodes_view_puts_current_episodes_first() -> None:
    rows = pa.table(
        {
            "courier_id": pa.array([1, 2, 3], pa.int64()),
            "order_id": pa.array([10, 20, 30], pa.int64()),
            "started_at": pa.array([T0, T0 + timedelta(hours=2), T0 + timedelta(hours=1)]),
            "ended_at": pa.array([None, T0 + timedelta(hours=2, minutes=9), T0 + timedelta(hours=1, minutes=6)]),
            "minutes": [7.5, 9.0, 6.0],
        }
    )
    frame = episodes_view(rows)
    assert list(frame["courier_id"]) == [1, 2, 3] and list(frame["current"]) == [True, False, False]
    assert frame["last_off_at"].iloc[0] == T0 + timedelta(minutes=7, seconds=30)
    assert frame["label"].iloc[0] == "courier 1, order 10, from 11-02 10:00"


def test_the_map_reads_the_corridor_and_only_that_courier_s_pings_around_the_episode(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    first, last = T0 + timedelta(minutes=20), T0 + timedelta(minutes=30)
    corridor = {"pickup_lat": -23.6, "pickup_lon": -46.7, "dropoff_lat": -23.58, "dropoff_lon": -46.7}
    # Order 7 had no coordinates at first, then gained them, then moved its drop-off: the newest change counts.
    changes = [order(7, T0, courier_id=5), order(7, T0, courier_id=5, **corridor)]
    changes.append(order(7, T0, courier_id=5, **{**corridor, "dropoff_lat": -23.57}))
    lines = [dump(cdc("u", "orders", row, lsn=100 + n, ts=T0 + timedelta(minutes=n))) for n, row in enumerate(changes)]
    write_file(settings.landing_dir, "oltp.public.orders", T0, 0, 0, lines)
    pings = [
        ping("in-corridor", first - timedelta(minutes=5), courier_id=5, lat=-23.59, lon=-46.7),
        ping("off", first, courier_id=5, lat=-23.59, lon=-46.67),
        ping("edge", last + MARGIN, courier_id=5, lat=-23.59, lon=-46.67),
        ping("too-early", first - MARGIN - timedelta(seconds=1), courier_id=5),
        ping("too-late", last + MARGIN + timedelta(seconds=1), courier_id=5),
        ping("other-courier", first, courier_id=6),
    ]
    write_file(settings.landing_dir, "logistics.tracking_pings", T0, 0, 0, [dump(p) for p in pings])
    write_file(settings.landing_dir, "logistics.tracking_pings", T0, 1, 0, [dump(pings[1])])  # a redelivered copy
    ingest_hour(settings, T0)

    catalog = load_catalog(settings)
    assert read_corridor(catalog, 7) == (-23.6, -46.7, -23.57, -46.7)
    assert read_corridor(catalog, 8) is None  # an order bronze does not hold
    pings = read_pings(catalog, 5, first, last)
    assert list(pings["ping_id"]) == ["in-corridor", "off", "edge"]
    assert list(pings["in_episode"]) == [False, True, False]
