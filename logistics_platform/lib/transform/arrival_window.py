"""The arrival hours a transform run builds: the hours its window tags name (beside Dagster's range tags of its days),
else every hour of its day partitions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from logistics_platform.lib.operate.landing_watch import RANGE_END_TAG, RANGE_START_TAG, run_partition_bounds
from logistics_platform.lib.timekeys import day_key, hour_key, hour_start, parse_day_key, parse_hour_key

WINDOW_START_TAG = "logistics/arrival_hours_start"
WINDOW_END_TAG = "logistics/arrival_hours_end"
HOUR, DAY = timedelta(hours=1), timedelta(days=1)


@dataclass(frozen=True)
class ArrivalWindow:
    """Arrival hours ``first`` .. ``last`` (inclusive hour starts, naive UTC) that one transform run builds."""

    first: datetime
    last: datetime

    def __post_init__(self) -> None:
        if self.last < self.first:
            raise ValueError(
                f"arrival window ends at {self.last_key} before it starts ({self.first_key}): give the first hour first"
            )

    @classmethod
    def of_hours(cls, first: str, last: str) -> ArrivalWindow:
        return cls(parse_hour_key(first), parse_hour_key(last))

    @classmethod
    def of_days(cls, start: datetime, end: datetime) -> ArrivalWindow:
        """Every hour of the half-open time window [start, end) of whole days (a Dagster partition time window)."""
        return cls(hour_start(start), hour_start(end) - HOUR)

    @property
    def first_key(self) -> str:
        return hour_key(self.first)

    @property
    def last_key(self) -> str:
        return hour_key(self.last)

    @property
    def label(self) -> str:
        return self.first_key if self.first == self.last else f"{self.first_key}..{self.last_key}"

    def hour_keys(self) -> list[str]:
        return [hour_key(self.first + i * HOUR) for i in range(int((self.last - self.first) / HOUR) + 1)]

    def window_tags(self) -> dict[str, str]:
        """The run tags that name the window (what the UI shows of the hours a run covered)."""
        return {WINDOW_START_TAG: self.first_key, WINDOW_END_TAG: self.last_key}

    def run_tags(self) -> dict[str, str]:
        """Tags of a transform run that builds exactly this window: its days as Dagster's range, and the hours."""
        return {RANGE_START_TAG: day_key(self.first), RANGE_END_TAG: day_key(self.last), **self.window_tags()}


def tagged_window(tags: Mapping[str, str]) -> ArrivalWindow | None:
    first, last = tags.get(WINDOW_START_TAG), tags.get(WINDOW_END_TAG)
    return ArrivalWindow.of_hours(first, last) if first and last else None


def run_window(tags: Mapping[str, str]) -> ArrivalWindow | None:
    """The arrival hours a run with these tags builds: its window tags, else every hour of its days (else None)."""
    if (window := tagged_window(tags)) is not None or (bounds := run_partition_bounds(tags)) is None:
        return window
    if ":" in bounds[0]:  # hour keys: a run from when the dbt layer was partitioned by hour
        return ArrivalWindow.of_hours(*bounds)
    return ArrivalWindow.of_days(parse_day_key(bounds[0]), parse_day_key(bounds[1]) + DAY)


def window_within_days(tags: Mapping[str, str], start: datetime, end: datetime) -> ArrivalWindow:
    """The window of a run of the day partitions [start, end); a ``ValueError`` if its tags name hours outside them."""
    days = ArrivalWindow.of_days(start, end)
    if (window := tagged_window(tags)) is None:
        return days
    if window.first < days.first or window.last > days.last:
        raise ValueError(
            f"run tags {WINDOW_START_TAG}/{WINDOW_END_TAG} ask for arrival hours {window.label}, outside the run's "
            f"day partitions {day_key(days.first)}..{day_key(days.last)}: launch the days that hold those hours, "
            "or drop the two tags to build every hour of the days"
        )
    return window
