"""The bronze checks, evaluated in the ingest step per arrival hour: accounting of every landed line (blocking,
:mod:`logistics_platform.lib.bronze.accounting`), schema incidents (ERROR), quarantine rate, schema drift (WARN)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import dagster as dg

from logistics_platform.defs.bronze.keys import EXTRA_KEY, QUARANTINE_KEY, TOPIC_KEYS
from logistics_platform.lib.bronze import schema as bs

if TYPE_CHECKING:  # the ingest step imports them; loading the definitions does not need them
    from logistics_platform.lib.bronze.accounting import TopicAccount
    from logistics_platform.lib.bronze.reports import IngestReport

CHECK_ACCOUNTING = "accounting"
CHECK_QUARANTINE_RATE = "quarantine_rate"
CHECK_SCHEMA_STABLE = "schema_stable"
CHECK_SCHEMA_INCIDENT = "schema_incident"
# Above this share of an hour's lines in quarantine, a producer is likely broken: warn (do not block).
QUARANTINE_RATE_WARN = 0.01
# Topics outside the contract (a WARN; an ERROR, so an alert, when one is new, grew or is unbalanced).
CHECK_OUTSIDE_CONTRACT = "outside_contract"
_SUMMED = ("lines", "bronze_rows", "quarantine_rows", "tombstones")  # the accounts' counts a range's metadata sums


def reason_counts(counts: Iterable[Mapping[str, int]]) -> dg.JsonMetadataValue:
    """Quarantined lines per reason, summed and sorted, as JSON metadata."""
    return dg.MetadataValue.json(dict(sorted(sum(map(Counter, counts), Counter()).items())))


def bronze_check_specs() -> list[dg.AssetCheckSpec]:
    """Accounting, schema stability and incidents per topic table, quarantine rate on the quarantine table."""
    stable = "Warns when this hour added columns to the table (additive schema evolution)."
    incident = (
        "Fails (ERROR, alerts) on lines of a type their column cannot take, or without a contract column the source "
        "renamed: docs/operations.md#schema-incidents"
    )
    checks = []
    for t, key in TOPIC_KEYS.items():
        accounting = (
            f"Landed lines of {bs.TOPICS[t].topic} in the hour = bronze rows + quarantine rows + "
            "tombstones (files recounted, rows from the tables' manifests); a run that appended to the hour accounts "
            "for the files it added (metadata: scope). Warns naming the files of the hour it does not read."
        )
        checks += [
            dg.AssetCheckSpec(CHECK_ACCOUNTING, asset=key, blocking=True, description=accounting),
            dg.AssetCheckSpec(CHECK_SCHEMA_STABLE, asset=key, description=stable),
            dg.AssetCheckSpec(CHECK_SCHEMA_INCIDENT, asset=key, description=incident),
        ]
    rate = f"Warns when more than {QUARANTINE_RATE_WARN:.0%} of an hour's lines are quarantined."
    extra = "Fails naming the topics outside the contract (bronze.extra_<topic>); an ERROR if new, grown or unbalanced."
    checks.append(dg.AssetCheckSpec(CHECK_OUTSIDE_CONTRACT, asset=EXTRA_KEY, description=extra))
    return [*checks, dg.AssetCheckSpec(CHECK_QUARANTINE_RATE, asset=QUARANTINE_KEY, description=rate)]


def bronze_check_results(
    reports: Sequence[IngestReport], accounts: Mapping[datetime, Mapping[str, TopicAccount]]
) -> Iterator[dg.AssetCheckResult]:
    """The check results of one ingest run: each fails when any hour fails; a range's metadata has every hour's."""
    from logistics_platform.lib.bronze.incidents import describe

    single = len(reports) == 1
    yield _outside_contract(reports, accounts)
    for t in (t for t in reports[0].topics if t in TOPIC_KEYS):
        per_hour = {r.partition_key: accounts[r.arrival_hour][t] for r in reports}
        unbalanced = [k for k, acc in per_hour.items() if not acc.balanced]
        damaged = {k: acc for k, acc in per_hour.items() if acc.corrupt_files}
        description = None
        if unbalanced:
            acc = per_hour[unbalanced[0]]
            where = (
                "" if single else f"{len(unbalanced)} hours ({', '.join(unbalanced[:5])}) unbalanced; {unbalanced[0]}: "
            )
            landed = "in the files appended" if acc.scope == "increment" else "landed"
            description = (
                f"{where}{acc.lines} lines {landed} but {acc.bronze_rows} rows + {acc.quarantine_rows} quarantined + "
                f"{acc.tombstones} tombstones are accounted for: re-run the partition; if it persists, compare "
                "bronze.ingest_log with the landing files of this hour"
            )
        elif damaged:  # a WARN: the readable lines are accounted for, downstream is not blocked
            files = [f for acc in damaged.values() for f in acc.corrupt_files]
            description = (
                f"cannot be read to the end: {', '.join(files)}; its complete lines before the damage "
                "are accounted for (bronze.quarantine, reason corrupt_file, says where reading stopped). Have the "
                "producer re-deliver it: the hour is re-ingested when the file changes"
            )
        unread = [f"{path} ({why})" for acc in per_hour.values() for path, why in acc.unread_files]
        if unread:  # a WARN too: nothing is skipped silently, but the files are not the contract's to read
            note = f"files not read (not landing files of the contract): {', '.join(unread)}"
            description = note if description is None else f"{description}; {note}"
        if single:
            metadata: dict[str, Any] = dict(next(iter(per_hour.values())).as_dict())
        else:
            metadata = {
                "arrival_hours": len(per_hour),
                "balanced": not unbalanced,
                "unbalanced_hours": dg.MetadataValue.json(unbalanced),
                **{k: sum(getattr(a, k) for a in per_hour.values()) for k in _SUMMED},
                "by_hour": dg.MetadataValue.json({k: a.as_dict() for k, a in per_hour.items()}),
            }
            if unread:
                metadata["unread_files"] = dg.MetadataValue.json(unread)
        yield _result(TOPIC_KEYS[t], CHECK_ACCOUNTING, description, metadata, error=bool(unbalanced))
        added = {k: v for r in reports for k, v in r.topics[t].added_columns.items()}
        stable = f"columns added or promoted by the landing data: {added}" if added else None
        yield _result(TOPIC_KEYS[t], CHECK_SCHEMA_STABLE, stable, {"added_columns": dg.MetadataValue.json(added)})
        incidents: dict[str, dict[str, Any]] = {}  # column -> its first position, in the run's first hour holding it
        for r in reports:
            for column, i in r.topics[t].incidents.items():
                incidents.setdefault(column, {**i, "arrival_hour": r.partition_key, "lines": 0})["lines"] += i["lines"]
        words = "; ".join(describe(t, c, i) for c, i in incidents.items()) or None
        found = {"table": bs.TOPICS[t].identifier, "incidents": dg.MetadataValue.json(incidents)}
        yield _result(TOPIC_KEYS[t], CHECK_SCHEMA_INCIDENT, words, found, error=True)
    rates = {r.partition_key: (r.quarantined / r.lines if r.lines else 0.0) for r in reports}
    high = {k: v for k, v in rates.items() if v > QUARANTINE_RATE_WARN}
    lines, quarantined = sum(r.lines for r in reports), sum(r.quarantined for r in reports)
    rate_meta: dict[str, Any] = {
        "rate": round(quarantined / lines if lines else 0.0, 6),
        "quarantined": quarantined,
        "lines": lines,
        "by_reason": reason_counts(r.quarantined_by_reason for r in reports),
    }
    if not single:
        rate_meta["hours_above_threshold"] = dg.MetadataValue.json({k: round(v, 6) for k, v in high.items()})
    rate_description = None
    if high and single:
        share = rates[reports[0].partition_key]
        rate_description = f"{share:.2%} of the hour's lines were quarantined (threshold {QUARANTINE_RATE_WARN:.0%})"
    elif high:
        worst = max(high, key=lambda k: high[k])
        rate_description = (
            f"{len(high)} hours had more than {QUARANTINE_RATE_WARN:.0%} of their lines quarantined "
            f"(worst {worst}: {high[worst]:.2%})"
        )
    yield _result(QUARANTINE_KEY, CHECK_QUARANTINE_RATE, rate_description, rate_meta)


def _result(
    key: dg.AssetKey, name: str, description: str | None, metadata: dict[str, Any], error: bool = False
) -> dg.AssetCheckResult:
    """A check result that fails with a ``description`` (what is wrong, for a person), at WARN unless ``error``."""
    severity = dg.AssetCheckSeverity.ERROR if error else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=name,
        passed=description is None,
        severity=severity,
        description=description,
        metadata=metadata,
    )


def _outside_contract(
    reports: Sequence[IngestReport], accounts: Mapping[datetime, Mapping[str, TopicAccount]]
) -> dg.AssetCheckResult:
    """Fails naming the topics outside the contract that landed, their tables and counts; an ERROR (the alert sensor
    posts it) when one is new or gained columns, or when its landed lines are not all accounted for."""
    counts = ("lines", "rows", "quarantined", "tombstones")
    topics = {
        reports[0].topics[t].topic: {
            "table": f"{bs.NAMESPACE}.{t}",
            **{c: sum(getattr(r.topics[t], c) for r in reports) for c in counts},
            "balanced": all(accounts[r.arrival_hour][t].balanced for r in reports),
            "new_columns": sorted({c for r in reports for c in r.topics[t].added_columns}),
        }
        for t in reports[0].topics
        if t not in TOPIC_KEYS
    }
    fix = "add each to the contract (docs/contract/sources.md), or leave it out at the connector (table.include.list)"
    error = any(v["new_columns"] or not v["balanced"] for v in topics.values())
    description = f"topics outside the source contract landed ({fix}): {json.dumps(topics)}" if topics else None
    return _result(EXTRA_KEY, CHECK_OUTSIDE_CONTRACT, description, {"topics": dg.MetadataValue.json(topics)}, error)
