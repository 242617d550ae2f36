"""verify / backlog / hourly schedule against a real bronze ingest (SQLite catalog, Iceberg files)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.cli import main
from logistics_platform.defs import operate
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.operate.progress import backlog, compare, read_ingest_log
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import HOUR, contract_hour, dump, order, write_file

NEXT = HOUR + timedelta(hours=1)


def _state(settings: Settings) -> tuple[dict, dict]:
    return scan_landing(settings.landing_dir, lookback_days=None), read_ingest_log(load_catalog(settings))


def test_verify_backlog_and_schedule_follow_ingest_and_delayed_files(
    tmp_path: Path, cli_env: Callable[[Settings], None], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = local_settings(tmp_path)
    contract_hour(settings.landing_dir, HOUR)
    ingest_hour(settings, HOUR)

    [report] = compare(*_state(settings), settings.landing_dir)
    assert report.status == "ok" and report.entries and all(e.balanced for e in report.entries)
    assert backlog(*_state(settings), settings.landing_dir).hours_pending == []

    # A delayed upload into the ingested hour, and a new hour nobody ingested yet.
    delayed = write_file(settings.landing_dir, "oltp.public.orders", HOUR, 3, 9000, [dump(order(99, HOUR))] * 3)
    write_file(settings.landing_dir, "oltp.public.orders", NEXT, 0, 20, [dump(order(50, NEXT))] * 2)
    reports = {r.hour: r for r in compare(*_state(settings), settings.landing_dir)}
    assert reports["2026-11-02-10:00"].status == "changed"
    assert reports["2026-11-02-10:00"].new_files == [delayed.relative_to(settings.landing_dir).as_posix()]
    assert reports["2026-11-02-11:00"].status == "never_ingested"
    state = backlog(*_state(settings), settings.landing_dir)
    assert state.hours_pending == ["2026-11-02-10:00", "2026-11-02-11:00"]
    assert (state.files_pending, state.lines_pending) == (2, 5)

    cli_env(settings)
    assert main(["verify"]) == 1
    out = capsys.readouterr().out
    assert "2026-11-02-10:00  CHANGED" in out and "2026-11-02-11:00  NEVER_INGESTED" in out
    assert main(["verify", "--json", "--hour", "2026-11-02-11:00"]) == 1
    assert [r["status"] for r in json.loads(capsys.readouterr().out)] == ["never_ingested"]

    # The hourly schedule at 12:05 reconciles 10:00 (changed) and 11:00 (new) ...
    schedule = operate.build_defs(settings).get_repository_def().get_schedule_def("hourly_ingest")
    tick = datetime(2026, 11, 2, 12, 5, tzinfo=UTC)
    with dg.instance_for_test() as instance:
        requests = schedule(dg.build_schedule_context(instance=instance, scheduled_execution_time=tick))
        assert sorted(r.partition_key for r in requests) == ["2026-11-02-10:00", "2026-11-02-11:00"]
        # ... and once both are ingested it has nothing to do.
        ingest_hour(settings, HOUR)
        ingest_hour(settings, NEXT)
        skipped = schedule(dg.build_schedule_context(instance=instance, scheduled_execution_time=tick))
        assert isinstance(skipped, dg.SkipReason)

    assert main(["verify", "--all"]) == 0
    assert "2 hours: 2 ok" in capsys.readouterr().out
    assert backlog(*_state(settings), settings.landing_dir).lines_pending == 0
