"""lib.dashboard.sla on small hand-made fct_region_sla rows at a given ``now``: statuses, the hours offered, the
default range, the heatmap's cells with the open hour's placeholders, breaches and open windows."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pyarrow as pa

from logistics_platform.lib.dashboard.sla import (
    BREACHED,
    NO_DELIVERIES,
    OPEN,
    TO_COME,
    TOO_FEW,
    WITHIN,
    SlaRule,
    breaches,
    default_range,
    deliveries_per_window,
    heatmap_cells,
    hour_options,
    latest_closed,
    open_windows,
    window_frame,
    window_of,
)

W = timedelta(minutes=5)
H = timedelta(hours=1)
RULE = SlaRule(window=W, min_deliveries=20, late_share_max=0.05)
OPEN_HOUR = datetime(2026, 11, 2, 13)
NOW = OPEN_HOUR + timedelta(minutes=17, seconds=30)  # the 13:15 window is filling


def _sla(rows: list[tuple[datetime, str, int, int, str | None, int, bool]]) -> pa.Table:
    names = ["window_start", "region", "deliveries", "late_deliveries", "late_share", "overdue_open", "breached"]
    cols = list(zip(*rows, strict=True))
    types = [pa.timestamp("us"), pa.string(), pa.int64(), pa.int64(), pa.decimal128(5, 4), pa.int64(), pa.bool_()]
    values = [list(c) for c in cols]
    values[4] = [Decimal(v) if v is not None else None for v in values[4]]
    return pa.table([pa.array(v, t) for v, t in zip(values, types, strict=True)], names=names)


# Two regions over 10:00 .. now: in the open hour, north breached in the ended 13:05 window and over the target so
# far in the filling one; south only to 13:00.
ROWS = _sla(
    [
        (datetime(2026, 11, 2, 10, 0), "north", 30, 0, "0", 0, False),
        (datetime(2026, 11, 2, 10, 0), "south", 5, 5, "1.0000", 0, False),
        (datetime(2026, 11, 2, 12, 55), "south", 0, 0, None, 2, False),
        (datetime(2026, 11, 2, 13, 0), "south", 25, 1, "0.0400", 1, False),
        (datetime(2026, 11, 2, 13, 5), "north", 24, 18, "0.7500", 0, True),
        (datetime(2026, 11, 2, 13, 15), "north", 22, 20, "0.9091", 3, True),
    ]
)


def test_a_window_is_judged_only_once_it_has_ended() -> None:
    frame = window_frame(ROWS, RULE, NOW)
    assert frame["status"].tolist() == [WITHIN, TOO_FEW, NO_DELIVERIES, WITHIN, BREACHED, OPEN]
    assert frame["window_end"].tolist() == [t + W for t in frame["window_start"]]
    assert frame["late_share"].tolist()[:2] == [0.0, 1.0] and frame["late_share"].isna().tolist()[2]
    # At 13:20 sharp the 13:15 window has ended: the mart's breach counts from then on.
    assert window_frame(ROWS, RULE, OPEN_HOUR + 4 * W).iloc[-1]["status"] == BREACHED


def test_window_of_aligns_to_the_hour() -> None:
    assert window_of(NOW, W) == OPEN_HOUR + 3 * W
    assert window_of(OPEN_HOUR + 3 * W, W) == OPEN_HOUR + 3 * W  # a window starts at its own start
    assert window_of(NOW, timedelta(minutes=20)) == OPEN_HOUR
    assert window_of(datetime(2026, 11, 2, 13, 59, 59, 999_999), W) == OPEN_HOUR + 11 * W


def test_the_hours_offered_run_from_the_first_window_to_the_open_hour() -> None:
    frame = window_frame(ROWS, RULE, NOW)
    assert hour_options(frame, NOW) == [OPEN_HOUR - 3 * H, OPEN_HOUR - 2 * H, OPEN_HOUR - H, OPEN_HOUR]
    # A mart that stopped long ago: at most max_hours back from its newest window, and still up to the open hour.
    later = OPEN_HOUR + 10 * H
    offered = hour_options(frame, later, max_hours=2)
    assert offered[0] == OPEN_HOUR - H and offered[-1] == later and len(offered) == 12
    assert hour_options(window_frame(ROWS.slice(0, 0), RULE, NOW), NOW) == [OPEN_HOUR]


def test_the_default_range_ends_on_the_open_hour_unless_nothing_arrived_lately() -> None:
    frame = window_frame(ROWS, RULE, NOW)
    options = hour_options(frame, NOW)
    assert default_range(options, frame, NOW, hours=2) == (OPEN_HOUR - H, OPEN_HOUR)
    assert default_range(options, frame, NOW, hours=6) == (OPEN_HOUR - 3 * H, OPEN_HOUR)  # not before the first
    # Seven hours later nothing newer arrived: the range shows the newest hours that have windows.
    later = NOW + 7 * H
    later_frame = window_frame(ROWS, RULE, later)
    assert default_range(hour_options(later_frame, later), later_frame, later, hours=2) == (OPEN_HOUR - H, OPEN_HOUR)
    # Two hours later the open hour is still within the range's hours: it stays on the open hour.
    soon = NOW + 2 * H
    soon_frame = window_frame(ROWS, RULE, soon)
    assert default_range(hour_options(soon_frame, soon), soon_frame, soon, hours=3) == (OPEN_HOUR, OPEN_HOUR + 2 * H)


def test_the_heatmap_holds_the_range_and_the_open_hours_windows_still_to_fill() -> None:
    frame = window_frame(ROWS, RULE, NOW)
    cells = heatmap_cells(frame, RULE, NOW, OPEN_HOUR - H, OPEN_HOUR)
    rows = cells[~cells["status"].isin([OPEN, TO_COME])]
    assert rows["window_start"].min() == OPEN_HOUR - W  # the 10:00 rows are outside the range
    open_cells = cells[cells["status"] == OPEN]
    # The filling window: north's row as it is so far, a placeholder for south.
    assert sorted(zip(open_cells["region"], open_cells["deliveries"], strict=True)) == [("north", 22), ("south", 0)]
    to_come = cells[cells["status"] == TO_COME]
    # 13:20 .. 13:55 for both regions, each once, drawn as nothing yet.
    assert sorted(set(to_come["window_start"])) == [OPEN_HOUR + (4 + i) * W for i in range(8)]
    assert len(to_come) == 16 and (to_come["deliveries"] == 0).all() and to_come["late_share"].isna().all()
    assert (to_come["window_end"] == to_come["window_start"] + W).all()
    assert cells["window_start"].is_monotonic_increasing
    # A range that ends before the open hour gets no placeholder.
    past = heatmap_cells(frame, RULE, NOW, OPEN_HOUR - 3 * H, OPEN_HOUR - H)
    assert set(past["status"]) == {WITHIN, TOO_FEW, NO_DELIVERIES} and len(past) == 3


def test_breaches_leave_the_open_window_out_and_latest_is_each_regions_newest_ended_window() -> None:
    frame = window_frame(ROWS, RULE, NOW)
    cells = heatmap_cells(frame, RULE, NOW, OPEN_HOUR - 3 * H, OPEN_HOUR)
    found = breaches(cells)
    assert found[["window_start", "region"]].values.tolist() == [[OPEN_HOUR + W, "north"]]
    latest = latest_closed(frame)
    assert latest[["region", "window_start", "breached"]].values.tolist() == [
        ["north", OPEN_HOUR + W, True],
        ["south", OPEN_HOUR, False],
    ]
    assert open_windows(cells)[["region", "deliveries"]].values.tolist() == [["north", 22]]


def test_an_empty_mart_gives_empty_frames() -> None:
    frame = window_frame(ROWS.slice(0, 0), RULE, NOW)
    cells = heatmap_cells(frame, RULE, NOW, OPEN_HOUR, OPEN_HOUR)
    assert frame.empty and cells.empty and breaches(cells).empty and latest_closed(frame).empty


def test_deliveries_per_window_stack_late_on_top_of_on_time_over_all_regions() -> None:
    frame = window_frame(ROWS, RULE, NOW)
    bars = deliveries_per_window(heatmap_cells(frame, RULE, NOW, OPEN_HOUR, OPEN_HOUR))
    segments = bars[["window_start", "kind", "low", "high", "count"]].values.tolist()
    assert segments[:2] == [[OPEN_HOUR, "on time", 0, 24, 24], [OPEN_HOUR, "late", 24, 25, 1]]
    # The filling window: north so far plus south's placeholder; a window to come has nothing yet.
    filling = bars[bars["window_start"] == OPEN_HOUR + 3 * W]
    assert filling[["kind", "count"]].values.tolist() == [["on time", 2], ["late", 20]]
    assert bars[bars["window_start"] == OPEN_HOUR + 11 * W]["count"].tolist() == [0, 0]
