"""Alerts: Slack payload shape, local log always written, POST reaches a real HTTP server, failures don't raise."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from logistics_platform.lib.operate.alerts import KIND_RUN_FAILURE, Alert, deliver, format_slack, read_log
from tests.support.http import Webhook


def _alert() -> Alert:
    return Alert(
        kind=KIND_RUN_FAILURE,
        summary="bronze_ingest_job failed",
        error="OSError: disk full",
        run_id="abc123",
        job_name="bronze_ingest_job",
        assets=("bronze/orders",),
        partition="2026-11-02-03:00",
    )


def test_slack_message_names_run_asset_partition_and_error() -> None:
    msg = format_slack(_alert())
    assert set(msg) == {"text", "blocks"}
    for needle in ("abc123", "bronze/orders", "2026-11-02-03:00", "disk full"):
        assert needle in msg["text"]
        assert needle in json.dumps(msg["blocks"])
    assert msg["blocks"][0]["type"] == "header"


def test_long_error_is_truncated_but_kept_valid() -> None:
    alert = Alert(kind="check_failure", summary="x", error="E" * 10_000)
    msg = format_slack(alert)
    assert len(json.dumps(msg)) < 4000
    assert "(truncated)" in msg["blocks"][2]["text"]["text"]


def test_alert_reaches_local_http_server_and_log(tmp_path: Path, webhook: Webhook) -> None:
    url = webhook.url
    log = tmp_path / "alerts.jsonl"
    result = deliver(_alert(), log, url)
    assert result.posted and result.logged
    assert len(webhook.received) == 1
    post = webhook.received[0]
    assert post["path"] == "/hooks/alerts"
    assert post["content_type"] == "application/json"
    assert "abc123" in post["body"]["text"]
    records = read_log(log)
    assert [r["run_id"] for r in records] == ["abc123"]
    assert records[0]["partition"] == "2026-11-02-03:00"


def test_unreachable_webhook_is_logged_not_raised(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "alerts.jsonl"
    result = deliver(_alert(), log, f"http://127.0.0.1:{port}/")
    assert not result.posted and result.error
    assert len(read_log(log)) == 1


def test_webhook_error_status_is_not_delivered(tmp_path: Path, webhook: Webhook) -> None:
    url = webhook.url
    webhook.status = 500
    result = deliver(_alert(), tmp_path / "a.jsonl", url)
    assert not result.posted
    assert len(webhook.received) == 1
    assert len(read_log(tmp_path / "a.jsonl")) == 1


def test_without_webhook_only_the_log_is_written(tmp_path: Path) -> None:
    result = deliver(_alert(), tmp_path / "sub" / "alerts.jsonl", None)
    assert result.logged and not result.posted
    assert len(read_log(tmp_path / "sub" / "alerts.jsonl")) == 1
