"""The arrival-hour window of a transform run: its tags, the day partitions it spans, and what a run of days builds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from logistics_platform.lib.transform.arrival_window import (
    WINDOW_END_TAG,
    WINDOW_START_TAG,
    ArrivalWindow,
    run_window,
    window_within_days,
)

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"


def test_a_window_across_midnight_names_its_hours_and_both_days() -> None:
    window = ArrivalWindow.of_hours("2026-11-01-22:00", "2026-11-02-01:00")
    assert window.hour_keys() == ["2026-11-01-22:00", "2026-11-01-23:00", "2026-11-02-00:00", "2026-11-02-01:00"]
    assert window.label == "2026-11-01-22:00..2026-11-02-01:00"
    assert window.run_tags() == {
        RANGE_START: "2026-11-01",
        RANGE_END: "2026-11-02",
        WINDOW_START_TAG: "2026-11-01-22:00",
        WINDOW_END_TAG: "2026-11-02-01:00",
    }
    one = ArrivalWindow.of_hours("2026-11-02-05:00", "2026-11-02-05:00")
    assert one.label == "2026-11-02-05:00" and one.hour_keys() == ["2026-11-02-05:00"]
    with pytest.raises(ValueError, match="before it starts"):
        ArrivalWindow.of_hours("2026-11-02-05:00", "2026-11-02-04:00")


def test_a_run_builds_its_tagged_hours_else_every_hour_of_its_days() -> None:
    tagged = ArrivalWindow.of_hours("2026-11-02-03:00", "2026-11-02-04:00").run_tags()
    assert run_window(tagged) == ArrivalWindow(datetime(2026, 11, 2, 3), datetime(2026, 11, 2, 4))
    days = run_window({RANGE_START: "2026-11-01", RANGE_END: "2026-11-02"})
    assert days == ArrivalWindow(datetime(2026, 11, 1, 0), datetime(2026, 11, 2, 23))
    assert run_window({"dagster/partition": "2026-11-02"}) == ArrivalWindow(
        datetime(2026, 11, 2, 0), datetime(2026, 11, 2, 23)
    )
    # A run from when the dbt layer was partitioned by hour still reads as its hours.
    legacy = run_window({RANGE_START: "2026-11-02-01:00", RANGE_END: "2026-11-02-02:00"})
    assert legacy is not None and legacy.label == "2026-11-02-01:00..2026-11-02-02:00"
    assert run_window({}) is None


def test_the_tagged_window_must_lie_in_the_runs_days() -> None:
    start, end = datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC)
    assert window_within_days({}, start, end).label == "2026-11-02-00:00..2026-11-02-23:00"
    inside = ArrivalWindow.of_hours("2026-11-02-07:00", "2026-11-02-08:00").window_tags()
    assert window_within_days(inside, start, end).label == "2026-11-02-07:00..2026-11-02-08:00"
    outside = ArrivalWindow.of_hours("2026-11-02-23:00", "2026-11-03-00:00").window_tags()
    with pytest.raises(ValueError, match=r"outside the run's day partitions 2026-11-02\.\.2026-11-02"):
        window_within_days(outside, start, end)
