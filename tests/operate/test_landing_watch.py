"""Pure decisions of the landing sensor and hourly schedule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from logistics_platform.lib.operate.landing_watch import (
    LOOKBACK_DAYS,
    combine_fingerprints,
    dump_cursor,
    held_hour,
    hour_folders,
    hours_to_reconcile,
    last_open_request,
    load_cursor,
    partition_hours,
    plan_ingest_requests,
    run_covers_hour,
    run_partition_bounds,
    stale_topics,
)


def test_new_hour_is_requested_once() -> None:
    reqs, cursor = plan_ingest_requests({"2026-11-01-00:00": "a"}, {})
    assert [(r.hour, r.reason) for r in reqs] == [("2026-11-01-00:00", "new")]
    again, cursor2 = plan_ingest_requests({"2026-11-01-00:00": "a"}, cursor)
    assert again == [] and cursor2 == cursor


def test_changed_file_set_requests_again_with_a_new_run_key() -> None:
    first, cursor = plan_ingest_requests({"2026-11-01-00:00": "a"}, {})
    second, _ = plan_ingest_requests({"2026-11-01-00:00": "b"}, cursor)
    assert [(r.hour, r.reason) for r in second] == [("2026-11-01-00:00", "changed")]
    assert second[0].run_key != first[0].run_key


def test_cursor_is_bounded_to_the_lookback_window() -> None:
    landed = {f"2026-11-{d:02d}-{h:02d}:00": "x" for d in range(1, 29) for h in range(24)}
    _, cursor = plan_ingest_requests(landed, {})
    assert len(cursor) == LOOKBACK_DAYS * 24 + 1
    assert min(cursor) == "2026-11-21-23:00"
    assert len(dump_cursor(cursor)) < 20_000


def test_hours_missing_from_a_listing_stay_in_the_cursor() -> None:
    _, cursor = plan_ingest_requests({"2026-11-01-00:00": "a", "2026-11-01-01:00": "b"}, {})
    reqs, cursor2 = plan_ingest_requests({"2026-11-01-01:00": "b"}, cursor)
    assert reqs == [] and "2026-11-01-00:00" in cursor2


def test_cursor_round_trip_and_garbage() -> None:
    assert load_cursor(dump_cursor({"h": "f"})) == {"h": "f"}
    assert load_cursor(None) == {} and load_cursor("not json") == {} and load_cursor('{"v": 99}') == {}


def test_the_open_hour_is_held_for_the_commit_interval_after_its_last_request() -> None:
    requested = datetime(2026, 11, 2, 13, 40, 0, tzinfo=UTC)
    last = ("2026-11-02-13:00", requested.timestamp())
    assert held_hour(last, requested + timedelta(seconds=29), 30) == "2026-11-02-13:00"
    assert held_hour(last, requested + timedelta(seconds=30), 30) is None  # the interval is over
    assert held_hour(last, requested + timedelta(seconds=1), 0) is None  # 0: every change at once
    assert held_hour(None, requested, 30) is None  # never requested (a first sighting, a fresh cursor)
    # The hour closed: the hour the last request named is no longer the one in progress, nothing waits.
    assert held_hour(last, datetime(2026, 11, 2, 14, 0, 5, tzinfo=UTC), 3600) is None


def test_a_held_hours_changes_coalesce_into_the_next_request() -> None:
    open_hour, closed = "2026-11-02-13:00", "2026-11-02-12:00"
    _, cursor = plan_ingest_requests({closed: "c1", open_hour: "o1"}, {})
    # Two files land in the open hour and a late one in a closed hour while the open hour is held: only the closed
    # hour is requested, and the open hour keeps the fingerprint of its last request.
    reqs, cursor2 = plan_ingest_requests({closed: "c2", open_hour: "o2"}, cursor, held=open_hour)
    assert [(r.hour, r.reason) for r in reqs] == [(closed, "changed")]
    reqs, cursor3 = plan_ingest_requests({closed: "c2", open_hour: "o3"}, cursor2, held=open_hour)
    assert reqs == [] and cursor3[open_hour] == "o1"
    # The interval is over: one request with everything landed since.
    reqs, cursor4 = plan_ingest_requests({closed: "c2", open_hour: "o3"}, cursor3)
    assert [(r.hour, r.fingerprint, r.reason) for r in reqs] == [(open_hour, "o3", "changed")]
    assert cursor4 == {closed: "c2", open_hour: "o3"}


def test_a_held_hours_first_sighting_is_requested_at_once() -> None:
    reqs, cursor = plan_ingest_requests({"2026-11-02-13:00": "o1"}, {}, held="2026-11-02-13:00")
    assert [(r.hour, r.reason) for r in reqs] == [("2026-11-02-13:00", "new")]
    assert cursor == {"2026-11-02-13:00": "o1"}


def test_the_open_request_round_trips_and_old_cursors_have_none() -> None:
    raw = dump_cursor({"h": "f"}, ("2026-11-02-13:00", 1.5))
    assert load_cursor(raw) == {"h": "f"} and last_open_request(raw) == ("2026-11-02-13:00", 1.5)
    assert last_open_request(dump_cursor({"h": "f"})) is None  # a cursor written before the interval existed
    assert last_open_request(None) is None and last_open_request("not json") is None
    assert last_open_request('{"v": 1, "open": 5}') is None


def test_reconcile_hours_are_the_closed_hour_and_the_one_before() -> None:
    tick = datetime(2026, 11, 2, 10, 5, tzinfo=UTC)
    assert hours_to_reconcile(tick) == ["2026-11-02-08:00", "2026-11-02-09:00"]


def test_hour_fingerprint_is_order_independent_and_sensitive() -> None:
    a = combine_fingerprints({"t1": "x", "t2": "y"})
    assert a == combine_fingerprints({"t2": "y", "t1": "x"})
    assert a != combine_fingerprints({"t1": "x", "t2": "z"})


def test_stale_topics() -> None:
    assert stale_topics({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9"}) == {"b": "changed", "c": "never"}


def test_a_run_covers_its_own_hour_and_every_hour_of_its_range() -> None:
    single = {"dagster/partition": "2026-11-01-02:00"}
    ranged = {
        "dagster/asset_partition_range_start": "2026-11-01-00:00",
        "dagster/asset_partition_range_end": "2026-11-01-23:00",
    }
    assert run_covers_hour(single, "2026-11-01-02:00")
    assert not run_covers_hour(single, "2026-11-01-03:00")
    assert all(run_covers_hour(ranged, f"2026-11-01-{h:02d}:00") for h in range(24))
    assert not run_covers_hour(ranged, "2026-11-02-00:00")
    assert not run_covers_hour(ranged, "2026-10-31-23:00")
    assert not run_covers_hour({"dagster/asset_partition_range_start": "2026-11-01-00:00"}, "2026-11-01-05:00")
    assert not run_covers_hour({}, "2026-11-01-05:00")
    assert run_partition_bounds(single) == ("2026-11-01-02:00", "2026-11-01-02:00")
    assert run_partition_bounds(ranged) == ("2026-11-01-00:00", "2026-11-01-23:00")
    assert run_partition_bounds({"dagster/asset_partition_range_end": "2026-11-01-23:00"}) is None


def test_the_hour_in_progress_is_a_partition_and_the_ones_outside_are_reported() -> None:
    now = datetime(2026, 11, 2, 13, 42, tzinfo=UTC)
    landed = ["2026-11-02-14:00", "2026-11-02-13:00", "2026-10-31-23:00", "2026-11-02-12:00", "2026-11-02-13:00"]
    taken, skipped = partition_hours(landed, "2026-11-01-00:00", now)
    assert taken == ["2026-11-02-12:00", "2026-11-02-13:00"]
    assert skipped == {
        "2026-10-31-23:00": "before PARTITIONS_START=2026-11-01-00:00",
        "2026-11-02-14:00": "after the hour in progress (2026-11-02-13:00): the sink's clock is ahead of this host's",
    }


def test_folders_that_are_not_arrival_hours_are_named(tmp_path: Path) -> None:
    topic = tmp_path / "topics" / "oltp.public.orders"
    for folder in (
        "dt=2026-11-02/hr=05",
        "dt=2026-11-02/hr=24",
        "dt=2026-11-02/hour=06",
        "dt=2026-02-30/hr=01",
        "date=2026-11-02",
        "_tmp/x",
        "dt=2026-11-02/+tmp",
    ):
        (topic / folder).mkdir(parents=True)
    # A topic outside the contract is ingested too (bronze.extra_*): its folders are judged the same way.
    (tmp_path / "topics" / "not.a.topic" / "junk").mkdir(parents=True)
    assert hour_folders(tmp_path)[1] == {
        "topics/not.a.topic/junk": "not a dt=YYYY-MM-DD folder",
        "topics/oltp.public.orders/date=2026-11-02": "not a dt=YYYY-MM-DD folder",
        "topics/oltp.public.orders/dt=2026-02-30": "2026-02-30 is not a date",
        "topics/oltp.public.orders/dt=2026-11-02/hour=06": "not an hr=00..23 folder",
        "topics/oltp.public.orders/dt=2026-11-02/hr=24": "not an hr=00..23 folder",
    }
    assert hour_folders(tmp_path / "nothing landed")[1] == {}
