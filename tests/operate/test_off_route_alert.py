"""The off-route check's query on a hand-made dbt DuckDB: a new episode is reported once, however it grows; a later
episode of the same pair is new; only the pairs the run rebuilt are looked at."""

from __future__ import annotations

from datetime import datetime, timedelta

import duckdb

from logistics_platform.lib.transform.operations import (
    ALERTED_EPISODES,
    Episode,
    new_off_route_episodes,
    off_route_summary,
)

T0 = datetime(2026, 11, 2, 10, 0)


def _rebuilt(con: duckdb.DuckDBPyConnection, pairs: list[tuple[int, int]], episodes: list[tuple]) -> None:  # type: ignore[type-arg]
    """The run's rebuilt pairs and the mart as the run left them."""
    con.execute("delete from intermediate.int_affected_off_route_pairs; delete from marts.fct_courier_off_route")
    if pairs:
        con.executemany("insert into intermediate.int_affected_off_route_pairs values (?, ?)", pairs)
    if episodes:
        con.executemany("insert into marts.fct_courier_off_route values (?, ?, ?, null, ?, 3, ?, 'north')", episodes)


def test_each_episode_is_reported_once() -> None:
    con = duckdb.connect()
    con.execute("create schema marts; create schema intermediate")
    con.execute("create table intermediate.int_affected_off_route_pairs (courier_id bigint, order_id bigint)")
    con.execute(
        "create table marts.fct_courier_off_route (courier_id bigint, order_id bigint, started_at timestamp,"
        " ended_at timestamp, minutes double, pings bigint, max_distance_km double, region varchar)"
    )
    # Courier 1 leaves order 10's corridor; courier 2's episode is in a pair the run did not rebuild.
    _rebuilt(con, [(1, 10)], [(1, 10, T0, 6.0, 2.5), (2, 20, T0, 9.0, 4.0)])
    assert new_off_route_episodes(con, "run-1") == [Episode(1, 10, T0, 6.0, 2.5, "north")]
    assert con.execute(f"select run_id, last_off_at from {ALERTED_EPISODES}").fetchall() == [
        ("run-1", T0 + timedelta(minutes=6))
    ]
    # The next run rebuilds the pair again: the episode grew (a late ping before its start, more after it): not new.
    _rebuilt(con, [(1, 10)], [(1, 10, T0 - timedelta(minutes=1), 12.5, 3.1)])
    assert new_off_route_episodes(con, "run-2") == []
    # The courier came back, then left again (a second episode of the pair, after the first one's last ping); courier
    # 2's pair is rebuilt this time.
    later = T0 + timedelta(minutes=20)
    _rebuilt(con, [(1, 10), (2, 20)], [(1, 10, T0, 12.5, 3.1), (1, 10, later, 5.0, 1.5), (2, 20, T0, 9.0, 4.0)])
    found = new_off_route_episodes(con, "run-3")
    assert [(e.courier_id, e.order_id, e.started_at) for e in found] == [(2, 20, T0), (1, 10, later)]
    assert new_off_route_episodes(con, "run-4") == []
    line = off_route_summary(found) or ""
    assert line.startswith("2 new off-route episode(s): courier 2 order 20 (north) off route from 2026-11-02 10:00:00")
    assert "courier 1 order 10 (north) off route from 2026-11-02 10:20:00 UTC: 5.0 min, up to 1.50 km" in line
