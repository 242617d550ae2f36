"""Live micro-batches into the open hour: the tables' metadata stays bounded, and the micro-batch snapshots of past
clock hours are expired without losing a row, breaking the accounting or what time travel promises
(docs/guarantees.md, "Time travel")."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

import duckdb
import pytest
from pyiceberg.expressions import EqualTo
from pyiceberg.table import Table

from logistics_platform.cli import main
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.commit import DEAD_MANIFESTS_MAX
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import list_hour_files
from logistics_platform.lib.bronze.tables import METADATA_PREVIOUS_VERSIONS, TABLE_PROPERTIES
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.maintenance import MaintenanceOptions, expiry, maintain_table
from logistics_platform.lib.maintenance.tags import (
    TimeTravelError,
    apply_daily_tags,
    query_as_of,
    resolve_as_of,
    tag_name,
)
from logistics_platform.lib.operate.progress import read_ingest_log
from logistics_platform.lib.timekeys import hour_key, hour_start
from logistics_platform.settings import Settings, local_settings
from tests.bronze.test_append import ORDERS, _orders, assert_same_bronze, open_hour, single_ingest
from tests.support.bronze import account_hour, contract_hour, write_file

LIVE = ("orders", bs.INGEST_LOG_TABLE)  # the tables each micro-batch of land_batch commits to
MERGE_AT = int(TABLE_PROPERTIES["commit.manifest.min-count-to-merge"])


def metadata_folder(settings: Settings, table: str) -> Path:
    location = load_catalog(settings).load_table(f"bronze.{table}").metadata_location
    return Path(urlparse(location).path).parent


def count_as_of(con: duckdb.DuckDBPyConnection, table: Table, as_of: str) -> tuple[int, ...] | None:
    """(rows,) of ``table`` as of ``as_of``, through the time travel that `time-travel` runs."""
    return query_as_of(con, table, as_of, "select count(*) from orders")[1].fetchone()


def record(settings: Settings, states: list[tuple[int, int, int]]) -> None:
    """Append orders' (snapshot id, committed at ms, rows) after a micro-batch to ``states``."""
    orders = load_catalog(settings).load_table("bronze.orders")
    snap = orders.current_snapshot()
    assert snap is not None
    states.append((snap.snapshot_id, snap.timestamp_ms, orders.scan().to_arrow().num_rows))


def assert_time_travel(
    con: duckdb.DuckDBPyConnection, orders: Table, states: list[tuple[int, int, int]], created_ms: int
) -> None:
    """What docs/guarantees.md promises of the ``states`` orders went through (created at ``created_ms``): a kept
    snapshot exactly; a timestamp never a state committed after it (exact at hour boundaries, within the live window
    and after the hour's last commit)."""
    kept = {s.snapshot_id for s in orders.metadata.snapshots}
    for snapshot_id, committed_ms, rows in states:
        if snapshot_id in kept:
            assert count_as_of(con, orders, str(snapshot_id)) == (rows,)
        at = datetime.fromtimestamp(committed_ms / 1000, UTC)
        try:
            resolved = resolve_as_of(orders, at.isoformat())
        except TimeTravelError:
            # Nothing kept by then: the table was created within T's clock hour, so at its start it was empty.
            assert hour_start(datetime.fromtimestamp(created_ms / 1000, UTC)) == hour_start(at)
            continue
        assert resolved.committed_at <= at
        (n,) = count_as_of(con, orders, at.isoformat())
        assert n <= rows


def land_batch(settings: Settings, hour: datetime, i: int) -> None:
    """The i-th micro-batch: one new small orders file into the hour (as a sink's next flush)."""
    write_file(settings.landing_dir, ORDERS, hour, 0, 10_000 + 10 * i, _orders(hour, 1_000 + 2 * i, 2, 30))


def test_metadata_stays_bounded_over_many_micro_batches(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    hour = open_hour()
    batches = 60
    for i in range(batches):
        land_batch(settings, hour, i)
        report = ingest_hour(settings, hour)
        assert report.mode == ("replace" if i == 0 else "append"), report.mode_reason
    for table in ("orders", bs.INGEST_LOG_TABLE):
        metadata_files = list(metadata_folder(settings, table).glob("*.metadata.json"))
        assert len(metadata_files) <= METADATA_PREVIOUS_VERSIONS + 1, (table, len(metadata_files))
    orders = load_catalog(settings).load_table("bronze.orders")
    # Appends merge manifests: planning the hour reads a bounded number of them, not one per micro-batch.
    assert len(orders.current_snapshot().manifests(orders.io)) < MERGE_AT  # type: ignore[union-attr]
    assert orders.scan().to_arrow().num_rows == 2 * batches
    # The ingest log's hour rows are replaced every batch: the manifests holding only their deleted entries are
    # consolidated away instead of piling up.
    log_table = load_catalog(settings).load_table(f"bronze.{bs.INGEST_LOG_TABLE}")
    assert len(log_table.current_snapshot().manifests(log_table.io)) <= DEAD_MANIFESTS_MAX + 1  # type: ignore[union-attr]


def test_a_past_hours_micro_batches_are_expired_without_losing_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_env: Callable[[Settings], None], capsys
) -> None:
    # No live window and a small batch: every superseded snapshot of the hour qualifies at once (in production only
    # those superseded 15 minutes ago, 16 at a time).
    monkeypatch.setattr(expiry, "LIVE_SNAPSHOT_WINDOW", timedelta(0))
    monkeypatch.setattr(expiry, "EARLY_EXPIRY_MIN_SNAPSHOTS", 4)
    settings = local_settings(tmp_path / "live")
    hour = open_hour()
    contract_hour(settings.landing_dir, hour)
    ingest_hour(settings, hour)
    created = load_catalog(settings).load_table("bronze.orders").metadata.snapshots[0].timestamp_ms
    states: list[tuple[int, int, int]] = []  # orders after each batch: (snapshot id, committed at ms, rows)
    for i in range(12):
        land_batch(settings, hour, i)
        assert ingest_hour(settings, hour).mode == "append"
        record(settings, states)

    orders = load_catalog(settings).load_table("bronze.orders")
    kept = {s.snapshot_id for s in orders.metadata.snapshots}
    assert len(kept) < len(states)  # expired in the commits themselves
    assert states[-1][0] in kept
    # The expired snapshots' manifest lists are gone with them; the kept ones' are all there.
    lists = {p.name for p in metadata_folder(settings, "orders").glob("snap-*.avro")}
    assert lists == {Path(s.manifest_list).name for s in orders.metadata.snapshots}

    # Not a row lost: the accounting balances, verify passes, and the hour equals one ingest of all its files.
    assert all(a.balanced for a in account_hour(settings, hour).values())
    cli_env(settings)
    assert main(["verify"]) == 0, capsys.readouterr().out
    assert_same_bronze(settings, single_ingest(settings, tmp_path, [hour]))
    # The next micro-batch still appends (planned on the expired table's metadata), exactly once.
    land_batch(settings, hour, 12)
    assert ingest_hour(settings, hour).mode == "append"
    assert_same_bronze(settings, single_ingest(settings, tmp_path / "again", [hour]))

    # Time travel: to a kept snapshot exactly; to a timestamp, never to a state after it (exact at hour boundaries,
    # within the live window and after the hour's last commit); the daily tag holds the day's end state.
    orders = load_catalog(settings).load_table("bronze.orders")
    con = connect()
    try:
        assert_time_travel(con, orders, states, created)
        now = datetime.now(UTC)
        (latest,) = count_as_of(con, orders, now.isoformat())
        assert latest == orders.scan().to_arrow().num_rows
        apply_daily_tags(orders, now=now + timedelta(days=1), retention_days=7)
        orders = load_catalog(settings).load_table("bronze.orders")
        assert count_as_of(con, orders, tag_name(now.date())) == (latest,)
    finally:
        con.close()

    # The nightly maintenance still runs on a table whose micro-batches were expired early.
    report = maintain_table(orders, MaintenanceOptions(now=now + timedelta(days=1), orphan_safety_window=timedelta(0)))
    assert report.error is None
    assert load_catalog(settings).load_table("bronze.orders").scan().to_arrow().num_rows == latest


def test_a_closed_hours_micro_batches_are_consolidated_by_the_next_hours_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_env: Callable[[Settings], None], capsys
) -> None:
    # As above: every superseded snapshot qualifies at once, in batches of 4 (production: 15 minutes, 16).
    monkeypatch.setattr(expiry, "LIVE_SNAPSHOT_WINDOW", timedelta(0))
    monkeypatch.setattr(expiry, "EARLY_EXPIRY_MIN_SNAPSHOTS", 4)
    settings = local_settings(tmp_path / "live")
    closed, current = open_hour() - timedelta(hours=1), open_hour()
    expected = contract_hour(settings.landing_dir, closed)
    assert ingest_hour(settings, closed).mode == "replace"
    created = load_catalog(settings).load_table("bronze.orders").metadata.snapshots[0].timestamp_ms
    states: list[tuple[int, int, int]] = []  # orders after each batch: (snapshot id, committed at ms, rows)
    for i in range(6):  # the sink's micro-batches while the hour was open
        land_batch(settings, closed, i)
        assert ingest_hour(settings, closed).mode == "append"
        record(settings, states)
    catalog = load_catalog(settings)
    orders = catalog.load_table("bronze.orders")
    closed_rows = orders.scan(row_filter=EqualTo("_arrival_hour", closed.isoformat())).to_arrow().num_rows
    # Every table that took the micro-batches: the snapshots it kept when the hour closed (some already expired).
    at_close_kept = {t: {s.snapshot_id for s in catalog.load_table(f"bronze.{t}").metadata.snapshots} for t in LIVE}

    # The hour closed; the sink writes into the next one, whose commits expire the closed hour's micro-batches.
    for i in range(6):
        land_batch(settings, current, 100 + i)
        assert ingest_hour(settings, current).mode == ("replace" if i == 0 else "append")
        record(settings, states)
    catalog = load_catalog(settings)
    orders = catalog.load_table("bronze.orders")
    for table, before in at_close_kept.items():  # consolidated: at most the closed hour's last snapshot is left
        snapshots = catalog.load_table(f"bronze.{table}").metadata.snapshots
        assert len(before) > 1 and len(before & {s.snapshot_id for s in snapshots}) <= 1, table
        # and the expired snapshots' manifest lists are deleted with them
        lists = {p.name for p in metadata_folder(settings, table).glob("snap-*.avro")}
        assert lists == {Path(s.manifest_list).name for s in snapshots}, table

    # Not a row lost, the accounting exact: each ingest log row lists the hour's landed files and counts its lines.
    assert orders.scan(row_filter=EqualTo("_arrival_hour", closed.isoformat())).to_arrow().num_rows == closed_rows
    logged = read_ingest_log(catalog, [hour_key(closed), hour_key(current)])
    batches = {"orders": (2 * 6, 2 * 6)}  # (lines, rows) the micro-batches added to the closed hour's orders
    for table, counts in expected.items():
        entry = logged[(bs.TOPICS[table].topic, hour_key(closed))]
        extra_lines, extra_rows = batches.get(table, (0, 0))
        assert (entry.lines, entry.rows) == (counts["lines"] + extra_lines, counts["rows"] + extra_rows), table
        assert entry.quarantined == sum(counts["quarantined"].values()) and entry.balanced, table
    assert logged[(ORDERS, hour_key(closed))].rows == closed_rows
    assert (logged[(ORDERS, hour_key(current))].lines, logged[(ORDERS, hour_key(current))].rows) == (12, 12)
    for (topic, key), entry in logged.items():
        landed = list_hour_files(settings.landing_dir, topic, closed if key == hour_key(closed) else current)
        assert list(entry.files) == [(f.relpath, f.size) for f in landed], (topic, key)
    for hour in (closed, current):
        assert all(a.balanced for a in account_hour(settings, hour).values())
    cli_env(settings)
    assert main(["verify"]) == 0, capsys.readouterr().out
    assert_same_bronze(settings, single_ingest(settings, tmp_path / "whole", [closed, current]))

    # Time travel (docs/guarantees.md) to every state the hours went through, and the daily tag holds the day's end
    # state with the closed hour whole.
    con = connect()
    try:
        latest = orders.scan().to_arrow().num_rows
        assert states[-1][0] == orders.current_snapshot().snapshot_id  # type: ignore[union-attr]
        assert_time_travel(con, orders, states, created)
        now = datetime.now(UTC)
        assert count_as_of(con, orders, now.isoformat()) == (latest,)
        apply_daily_tags(orders, now=now + timedelta(days=1), retention_days=7)
        orders = load_catalog(settings).load_table("bronze.orders")
        tag = tag_name(now.date())
        sql = f"select count(*) from orders where _arrival_hour = '{closed.isoformat()}'"
        assert query_as_of(con, orders, tag, sql)[1].fetchone() == (closed_rows,)
        assert count_as_of(con, orders, tag) == (latest,)
    finally:
        con.close()


def test_micro_batch_selection_keeps_each_clock_hours_last_snapshot_and_the_live_window(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    hour = open_hour()
    for i in range(5):
        land_batch(settings, hour, i)
        ingest_hour(settings, hour)
    orders = load_catalog(settings).load_table("bronze.orders")
    snaps = sorted(orders.metadata.snapshots, key=lambda s: s.timestamp_ms)
    last = snaps[-1]
    # Inside the live window nothing goes; an hour later every snapshot but the last of its clock hour(s) goes.
    assert expiry.micro_batch_snapshots(orders.metadata, datetime.now(UTC)) == []
    later = expiry.micro_batch_snapshots(orders.metadata, datetime.now(UTC) + timedelta(hours=1))
    hour_lasts = {
        s.snapshot_id
        for s, nxt in zip(snaps, [*snaps[1:], None], strict=True)
        if nxt is None or nxt.timestamp_ms // 3_600_000 != s.timestamp_ms // 3_600_000
    }
    assert last.snapshot_id in hour_lasts
    assert set(later) == {s.snapshot_id for s in snaps} - hour_lasts
