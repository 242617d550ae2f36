"""`run`'s plan: the landed hours an ingest has work in, from the landing zone and bronze.ingest_log alone."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

from logistics_platform.lib.bronze.increment import UNCHANGED
from logistics_platform.lib.bronze.ingest import ingest_hours
from logistics_platform.lib.bronze.landing import hour_dir
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.operate.progress import changed_hours, folders_to_check, read_ingest_log
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import HOUR, dump, order, ping, write_file

ORDERS, PINGS = "oltp.public.orders", "logistics.tracking_pings"
HOURS = [HOUR + timedelta(hours=i) for i in range(6)]
KEYS = [hour_key(h) for h in HOURS]


def _plan(settings: Settings) -> tuple[list[str], list[str]]:
    """The plan over the landed hours, as `run` makes it."""
    scan = scan_landing(settings.landing_dir, lookback_days=None)
    return changed_hours(scan, scan, read_ingest_log(load_catalog(settings)), settings.landing_dir)


def test_the_hours_planned_up_to_date_are_exactly_those_the_ingest_leaves_unchanged(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    landing = settings.landing_dir
    for i, hour in enumerate(HOURS[:5]):
        write_file(landing, ORDERS, hour, 0, 0, [dump(order(100 * i + n, hour)) for n in range(3)])
        write_file(landing, ORDERS, hour, 0, 10, [dump(order(100 * i + n, hour)) for n in range(3, 6)])
        write_file(landing, PINGS, hour, 0, 0, [dump(ping(f"p{i}-{n}", hour)) for n in range(4)])
    ingest_hours(settings, HOURS[:5])
    assert _plan(settings) == ([], KEYS[:5])

    untouched, grown, shrunk, removed, topic_gone, new = HOURS
    write_file(landing, ORDERS, grown, 1, 0, [dump(order(999, grown))])  # a delayed file
    write_file(landing, ORDERS, shrunk, 0, 10, [dump(order(203, shrunk))])  # re-delivered with fewer lines
    (landing / hour_dir(ORDERS, removed) / f"{ORDERS}+0+0000000010.json").unlink()
    shutil.rmtree(landing / hour_dir(PINGS, topic_gone))  # every file of a logged topic gone
    write_file(landing, PINGS, new, 0, 0, [dump(ping("p-new", new))])  # never ingested

    todo, current = _plan(settings)
    assert (todo, current) == (KEYS[1:], [hour_key(untouched)])
    # What the ingest itself decides, hour by hour, from the same landing zone (it also checks the tables).
    reports = ingest_hours(settings, HOURS)
    assert [r.partition_key for r in reports if r.mode == UNCHANGED] == current
    assert _plan(settings) == ([], KEYS)


def test_run_looks_at_the_recent_folders_and_the_never_logged_older_ones_only() -> None:
    folders = [(topic, HOUR + timedelta(hours=h)) for h in range(0, 20 * 24, 6) for topic in (ORDERS, PINGS)]
    logged = {(t, hour_key(h)) for t, h in folders} - {(PINGS, hour_key(HOUR + timedelta(hours=6)))}
    checked = folders_to_check(folders, logged, lookback_days=7)
    newest_day = (HOUR + timedelta(hours=19 * 24 + 18)).replace(hour=0)
    recent = [(t, h) for t, h in folders if h >= newest_day - timedelta(days=8)]
    assert checked == [(PINGS, HOUR + timedelta(hours=6)), *recent]
    assert len(recent) < len(folders) / 2
    assert folders_to_check([], logged, lookback_days=7) == []
    # Before the first ingest every folder is looked at.
    assert folders_to_check(folders, set(), lookback_days=7) == folders
