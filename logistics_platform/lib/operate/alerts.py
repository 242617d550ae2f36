"""Alerts: a Slack-compatible message for a failed run or check, delivered to the local log, then a webhook."""

from __future__ import annotations

import json
import logging
import urllib.request
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_SECONDS = 5.0
# Slack truncates long section text (3000 chars); keep the error readable and the payload valid.
MAX_ERROR_CHARS = 1500

KIND_RUN_FAILURE = "run_failure"
KIND_CHECK_FAILURE = "check_failure"
KIND_FRESHNESS = "freshness"
TITLES = {KIND_RUN_FAILURE: "Run failed", KIND_CHECK_FAILURE: "Asset check failed", KIND_FRESHNESS: "Data is stale"}


@dataclass(frozen=True)
class Alert:
    """What went wrong, where: enough for a person to find the run and re-run the partition."""

    kind: str
    summary: str
    error: str
    run_id: str | None = None
    job_name: str | None = None
    assets: tuple[str, ...] = ()
    partition: str | None = None
    check_name: str | None = None
    at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))


def check_alert(
    asset: str, check: str, error: str, run_id: str | None, job_name: str | None, partition: str | None, kind: str
) -> Alert:
    """The alert of a failed check ``check`` of ``asset``."""
    return Alert(kind, f"{asset} {check}", error, run_id, job_name, (asset,), partition, check)


@dataclass(frozen=True)
class DeliveryResult:
    logged: bool
    posted: bool
    error: str | None = None


def _truncate(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 20].rstrip() + "\n... (truncated)"


def format_slack(alert: Alert) -> dict[str, Any]:
    """The Slack incoming-webhook payload: ``text`` (notification fallback) and ``blocks``."""
    assets = ", ".join(alert.assets) or "-"
    title = TITLES.get(alert.kind, "Alert")
    text = (
        f"{title}: {alert.summary} | run {alert.run_id or '-'} | asset {assets} | "
        f"partition {alert.partition or '-'} | error: {_truncate(alert.error, 300)}"
    )
    run = f"`{alert.run_id or '-'}`" + (f" ({alert.job_name})" * bool(alert.job_name))
    named = {"Run": run, "Asset": assets, "Partition": alert.partition or "-", "Check": alert.check_name}
    fields = [{"type": "mrkdwn", "text": f"*{name}*\n{value}"} for name, value in named.items() if value]
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": f"{title}: {alert.summary}"[:150]}},
        {"type": "section", "fields": fields},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*Error*\n```{_truncate(alert.error)}```"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"{alert.kind} at {alert.at}"}]},
    ]
    return {"text": text, "blocks": blocks}


def deliver(alert: Alert, alerts_log: Path, webhook_url: str | None) -> DeliveryResult:
    """Append the alert and its Slack payload to the JSON Lines log (always), then POST the payload to the webhook
    when one is set. Never raises: a failure is logged, and the alert is in the log when the webhook is down."""
    logged = True
    try:
        alerts_log.parent.mkdir(parents=True, exist_ok=True)
        with alerts_log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({**asdict(alert), "message": format_slack(alert)}, sort_keys=True) + "\n")
    except OSError as exc:
        logged = False
        log.error("could not append the alert to %s (%s); check the ALERTS_LOG path", alerts_log, exc)
    if not webhook_url:
        return DeliveryResult(logged=logged, posted=False)
    try:
        body = json.dumps(format_slack(alert)).encode("utf-8")
        request = urllib.request.Request(webhook_url, body, {"Content-Type": "application/json"}, method="POST")
        # urllib raises HTTPError for any final status outside 2xx (a refused alert).
        urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_SECONDS).close()
    except Exception as exc:  # any failure to deliver must not break the sensor that raised the alert
        log.warning("alert not delivered to ALERT_WEBHOOK_URL (%s); it is in %s", exc, alerts_log)
        return DeliveryResult(logged=logged, posted=False, error=str(exc))
    return DeliveryResult(logged=logged, posted=True)


# Metadata key of a check evaluation whose alert its own run already delivered (the check-alert sensor skips it).
DELIVERED_KEY = "alert_delivered"


def delivered(result: DeliveryResult, webhook_url: str | None) -> bool:
    """Whether an alert reached every place it goes: the log, and the webhook when one is configured."""
    return result.logged and (result.posted or not webhook_url)


def read_log(path: Path) -> list[dict[str, Any]]:
    """All alerts recorded in the local log (tests and the runbook)."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]
