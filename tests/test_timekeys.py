"""The hour key and epoch microseconds, the two time encodings every layer shares (lib/timekeys.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from logistics_platform.lib.timekeys import (
    HOUR_KEY_FORMAT,
    day_key,
    epoch_micros,
    from_epoch_micros,
    hour_key,
    hour_start,
    parse_day_key,
    parse_hour_key,
    utc_naive,
)

H = datetime(2026, 11, 2, 10)
PLUS_TWO = timezone(timedelta(hours=2))


def test_hour_key_names_the_utc_hour_a_moment_falls_in() -> None:
    assert hour_key(H) == "2026-11-02-10:00" == H.strftime(HOUR_KEY_FORMAT)
    assert hour_key(datetime(2026, 11, 2, 10, 59, 59, 999999)) == "2026-11-02-10:00"
    assert hour_key(datetime(2026, 11, 2, 12, 30, tzinfo=PLUS_TWO)) == "2026-11-02-10:00"
    assert hour_start(datetime(2026, 11, 2, 0, 15, tzinfo=PLUS_TWO)) == datetime(2026, 11, 1, 22)
    assert utc_naive(datetime(2026, 11, 2, 12, 30, 1, 5, tzinfo=PLUS_TWO)) == datetime(2026, 11, 2, 10, 30, 1, 5)
    assert utc_naive(H) is H


def test_hour_keys_round_trip_and_a_bad_key_says_the_form() -> None:
    assert parse_hour_key("2026-11-02-10:00") == H
    assert parse_hour_key(hour_key(H)) == H and parse_hour_key(hour_key(H)).tzinfo is None
    with pytest.raises(ValueError, match=r"'2026-11-02T10'.*expected YYYY-MM-DD-HH:MM, e\.g\. 2026-11-01-05:00"):
        parse_hour_key("2026-11-02T10")


def test_epoch_micros_is_exact_for_naive_and_aware_moments() -> None:
    assert epoch_micros(datetime(1970, 1, 1)) == 0
    assert epoch_micros(datetime(1970, 1, 1, 0, 0, 1)) == 1_000_000
    moment = datetime(2026, 11, 2, 10, 15, 30, 123456)
    assert epoch_micros(moment) == 1793614530123456
    assert epoch_micros(moment.replace(tzinfo=UTC)) == epoch_micros(moment)
    assert epoch_micros(datetime(2026, 11, 2, 12, 15, 30, 123456, tzinfo=PLUS_TWO)) == epoch_micros(moment)
    assert epoch_micros(datetime(1969, 12, 31, 23, 59, 59, 999999)) == -1


def test_epoch_micros_takes_the_whole_datetime_range() -> None:
    # Converting to UTC first would overflow here; the value is still a plain number of microseconds.
    earliest = datetime(1, 1, 1, tzinfo=PLUS_TWO)
    assert epoch_micros(earliest) == epoch_micros(datetime(1, 1, 1)) - 2 * 3600 * 1_000_000
    assert epoch_micros(datetime.max) == epoch_micros(datetime(9999, 12, 31)) + 86_400_000_000 - 1


def test_from_epoch_micros_inverts_epoch_micros() -> None:
    for moment in (datetime(1970, 1, 1), datetime(2026, 11, 2, 10, 15, 30, 123456), datetime(1969, 7, 20, 20, 17)):
        assert from_epoch_micros(epoch_micros(moment)) == moment
    assert from_epoch_micros(-1) == datetime(1969, 12, 31, 23, 59, 59, 999999)


def test_day_keys() -> None:
    assert day_key(datetime(2026, 11, 2, 23, 59)) == "2026-11-02"
    assert day_key(datetime(2026, 11, 2, 23, 30, tzinfo=UTC)) == "2026-11-02"
    assert parse_day_key("2026-11-02") == datetime(2026, 11, 2)
    with pytest.raises(ValueError, match="expected YYYY-MM-DD"):
        parse_day_key("2026-11-02-00:00")
