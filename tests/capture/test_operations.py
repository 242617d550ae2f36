"""The capture commands and the capture asset's checks (lag warning, WAL retention alert) on a real slot."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.cli import main
from logistics_platform.defs.capture.assets import capture_slot_lag, capture_wal_retention, oltp_changes
from logistics_platform.lib.operate.alerts import read_log
from logistics_platform.settings import local_settings

pytestmark = pytest.mark.postgres


def test_commands_simulate_and_capture(
    oltp_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LANDING_DIR", str(tmp_path / "landing"))
    monkeypatch.setenv("OLTP_DSN", oltp_dsn)
    monkeypatch.setenv("CAPTURE_SLOT", "cap_cli")
    monkeypatch.setenv("CAPTURE_PUBLICATION", "cap_cli")
    assert main(["oltp-simulate", "--changes", "300"]) == 0
    assert "changes in" in capsys.readouterr().out
    assert main(["capture"]) == 0
    assert "new slot, snapshot of" in capsys.readouterr().out
    assert main(["oltp-simulate", "--changes", "100", "--seed", "2"]) == 0
    assert main(["capture"]) == 0
    out = capsys.readouterr().out
    assert "transactions" in out and "new slot" not in out
    assert main(["capture", "--mode", "query"]) == 0
    assert list((tmp_path / "landing" / "topics").iterdir())
    monkeypatch.setenv("CAPTURE_SLOT", "Bad-Name")
    assert main(["capture"]) == 1
    assert "CAPTURE_SLOT='Bad-Name'" in capsys.readouterr().err


def test_lag_check_warns_and_an_inactive_slot_retaining_wal_alerts(oltp_dsn: str, tmp_path: Path) -> None:
    import psycopg2

    from logistics_platform.lib.capture.simulate import simulate

    conn = psycopg2.connect(oltp_dsn)
    simulate(conn, 100, seed=1)
    settings = local_settings(tmp_path, oltp_dsn=oltp_dsn, capture_slot="cap_ops", capture_publication="cap_ops")
    checks = [capture_slot_lag, capture_wal_retention]
    result = dg.materialize([oltp_changes, *checks], resources={"settings": settings})
    evals = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert evals["capture_slot_lag"].passed and evals["capture_wal_retention"].passed
    assert not read_log(settings.alerts_log)

    simulate(conn, 800, seed=2)  # WAL written and not captured: the slot falls behind and retains it
    strict = settings.with_overrides(capture_lag_warn_bytes=1000, capture_wal_retention_alert_bytes=1000)
    result = dg.materialize(
        [oltp_changes, *checks],
        resources={"settings": strict},
        selection=dg.AssetSelection.checks_for_assets(oltp_changes),  # the checks alone, no capture
    )
    evals = {e.check_name: e for e in result.get_asset_check_evaluations()}
    lag = evals["capture_slot_lag"]
    assert not lag.passed and lag.severity == dg.AssetCheckSeverity.WARN
    assert "WAL bytes behind" in (lag.description or "")
    ret = evals["capture_wal_retention"]
    assert not ret.passed and ret.severity == dg.AssetCheckSeverity.ERROR
    (alert,) = read_log(settings.alerts_log)
    assert "inactive and retains" in alert["error"]
    conn.close()
