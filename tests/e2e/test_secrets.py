"""No credential leaks: the catalog password (in ICEBERG_CATALOG_URI) and the Dagster storage password
(DAGSTER_PG_PASSWORD) appear in no log line, Dagster event or its metadata, run record or job snapshot (what the UI
shows as run config and tags), Iceberg snapshot property, error message or alert payload.

The local server trusts 127.0.0.1, so it accepts these passwords unchecked; a wrong role stands in for wrong
credentials (the server refuses it at authentication, like a wrong password).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy.engine import make_url

from logistics_platform.cli import main
from logistics_platform.defs.bronze import build_defs
from logistics_platform.defs.operate.alert_sensors import run_failure_alert
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.operate import alerts
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings
from tests.conftest import Webhook
from tests.support.bronze import HOUR, contract_hour
from tests.support.prod import prod_instance, prod_settings

pytestmark = pytest.mark.postgres

CATALOG_PASSWORD = "tst-catalog-pw-4f9e1c"
DAGSTER_PASSWORD = "tst-dagster-pw-b72d05"
WRONG_ROLE = "no_such_role"


def _with_password(uri: str, username: str | None = None) -> str:
    url = make_url(uri).set(password=CATALOG_PASSWORD)
    return (url.set(username=username) if username else url).render_as_string(hide_password=False)


def _leaks(texts: dict[str, str]) -> list[str]:
    return [
        f"{where}: {secret}"
        for where, text in texts.items()
        for secret in (CATALOG_PASSWORD, DAGSTER_PASSWORD)
        if secret in text
    ]


def _catalog_texts(settings: Settings) -> dict[str, str]:
    """Everything the catalog keeps about its tables: metadata files, snapshot summaries, table properties."""
    warehouse = Path(settings.warehouse[len("file://") :])
    texts = {f"metadata file {p.name}": p.read_text() for p in warehouse.rglob("*.metadata.json")}
    catalog = load_catalog(settings)
    for ident in catalog.list_tables("bronze"):
        table = catalog.load_table(ident)
        texts[f"snapshots of {'.'.join(ident)}"] = json.dumps(
            [s.summary.model_dump() for s in table.snapshots()] + [table.properties], default=str
        )
    return texts


def _dagster_texts(instance: dg.DagsterInstance, run_ids: list[str]) -> dict[str, str]:
    """Run records (config, tags), job snapshots and every event with its metadata, as stored."""
    texts = {}
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        assert run is not None
        texts[f"run {run_id}"] = dg.serialize_value(run)
        assert run.job_snapshot_id is not None
        texts[f"job snapshot of {run_id}"] = dg.serialize_value(instance.get_job_snapshot(run.job_snapshot_id))
        texts[f"events of {run_id}"] = "\n".join(dg.serialize_value(e) for e in instance.all_logs(run_id))
    return texts


def test_no_credential_in_logs_events_runs_snapshots_errors_or_alerts(
    tmp_path: Path,
    pg_database: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    webhook: Webhook,
) -> None:
    caplog.set_level(logging.DEBUG)
    landing = tmp_path / "landing"
    contract_hour(landing, HOUR)
    catalog_uri = _with_password(pg_database)
    settings = prod_settings(tmp_path / "prod", landing, catalog_uri, ALERT_WEBHOOK_URL=webhook.url)
    wrong = settings.with_overrides(catalog_uri=_with_password(pg_database, username=WRONG_ROLE))
    assets = list(build_defs(settings).assets or [])
    key = hour_key(HOUR)

    with prod_instance(tmp_path / "dagster_home", pg_database, monkeypatch, password=DAGSTER_PASSWORD) as instance:
        ok = dg.materialize(assets, instance=instance, resources=build_resources(settings), partition_key=key)
        assert ok.success
        failed = dg.materialize(
            assets, instance=instance, resources=build_resources(wrong), partition_key=key, raise_on_error=False
        )
        assert not failed.success

        # The alert for the failed run, as the run-failure sensor builds and delivers it.
        run = instance.get_run_by_id(failed.run_id)
        failure = next(iter(instance.all_logs(failed.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)))
        assert run is not None and failure.dagster_event is not None
        context = dg.build_run_status_sensor_context(
            sensor_name="run_failure_alerts",
            dagster_event=failure.dagster_event,
            dagster_instance=instance,
            dagster_run=run,
        ).for_run_failure()
        alert = run_failure_alert(context)
        assert WRONG_ROLE in alert.error  # the alert says what is wrong, without the password
        assert alerts.deliver(alert, settings.alerts_log, settings.alert_webhook_url).posted
        texts = _dagster_texts(instance, [ok.run_id, failed.run_id])

    # The CLI's one-line errors for the same wrong credentials.
    monkeypatch.setenv("LOGISTICS_ENV", "prod")
    monkeypatch.setenv("LANDING_DIR", str(landing))
    monkeypatch.setenv("ICEBERG_CATALOG_URI", wrong.catalog_uri)
    monkeypatch.setenv("ICEBERG_WAREHOUSE", settings.warehouse)
    assert main(["verify"]) == 1
    out, err = capfd.readouterr()
    cli_line = err.strip().splitlines()[-1]
    assert "ICEBERG_CATALOG_URI" in cli_line and WRONG_ROLE in cli_line

    texts.update(_catalog_texts(settings))
    texts["alerts log"] = settings.alerts_log.read_text()
    texts["webhook payloads"] = json.dumps(webhook.bodies)
    texts["log records"] = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    texts["stdout"], texts["stderr"] = out, err
    # The scan looks at real content: the materializations, snapshots and the failure are all there.
    assert "bronze_ingest" in texts[f"events of {ok.run_id}"]
    assert WRONG_ROLE in texts[f"events of {failed.run_id}"] and WRONG_ROLE in texts["webhook payloads"]
    assert any(t.startswith("snapshots of") for t in texts) and any(t.startswith("metadata file") for t in texts)
    assert _leaks(texts) == []


def test_an_unreachable_dagster_storage_fails_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # Port 9 (discard) on localhost: nothing listens, every connection is refused at once.
    nowhere = "postgresql+psycopg2://postgres@127.0.0.1:9/dagster"
    with pytest.raises(Exception) as raised, prod_instance(tmp_path / "home", nowhere, monkeypatch, DAGSTER_PASSWORD):
        pass
    chain, e = [], raised.value
    while e is not None:
        chain.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    texts = {"error chain": "\n".join(chain), "logs": "\n".join(r.getMessage() for r in caplog.records)}
    assert "port 9 failed" in texts["error chain"]
    assert _leaks(texts) == []
