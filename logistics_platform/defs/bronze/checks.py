"""The bronze checks: accounting of every landed line (blocking), quarantine rate and schema drift (warnings).

They are evaluated inside the ingest step, from its report and a DuckDB re-read of the committed tables
(:mod:`logistics_platform.lib.bronze.accounting`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import dagster as dg

from logistics_platform.defs.bronze.keys import QUARANTINE_KEY, TOPIC_KEYS
from logistics_platform.lib.bronze import schema as bs

if TYPE_CHECKING:  # the ingest step imports them; loading the definitions does not need them
    from logistics_platform.lib.bronze.accounting import TopicAccount
    from logistics_platform.lib.bronze.ingest import IngestReport

CHECK_ACCOUNTING = "accounting"
CHECK_QUARANTINE_RATE = "quarantine_rate"
CHECK_SCHEMA_STABLE = "schema_stable"
# Above this share of an hour's lines in quarantine, a producer is likely broken: warn (do not block).
QUARANTINE_RATE_WARN = 0.01


def bronze_check_specs() -> list[dg.AssetCheckSpec]:
    """Accounting and schema stability per topic table, quarantine rate on the quarantine table."""
    checks = []
    for t, key in TOPIC_KEYS.items():
        checks.append(
            dg.AssetCheckSpec(
                CHECK_ACCOUNTING,
                asset=key,
                blocking=True,
                description=f"Landed lines of {bs.TOPICS[t].topic} in the hour = bronze rows + quarantine rows + "
                "tombstones (files recounted, tables re-read with DuckDB).",
            )
        )
        checks.append(
            dg.AssetCheckSpec(
                CHECK_SCHEMA_STABLE,
                asset=key,
                description="Warns when this hour added columns to the table (additive schema evolution).",
            )
        )
    checks.append(
        dg.AssetCheckSpec(
            CHECK_QUARANTINE_RATE,
            asset=QUARANTINE_KEY,
            description=f"Warns when more than {QUARANTINE_RATE_WARN:.0%} of an hour's lines are quarantined.",
        )
    )
    return checks


def bronze_check_results(report: IngestReport, accounts: Mapping[str, TopicAccount]) -> Iterator[dg.AssetCheckResult]:
    """The check results of one ingested hour, from its ingest report and its accounting."""
    for t, acc in accounts.items():
        description = None
        if not acc.balanced:
            description = (
                f"{acc.lines} lines landed but {acc.bronze_rows} rows + {acc.quarantine_rows} quarantined + "
                f"{acc.tombstones} tombstones are accounted for: re-run the partition; if it persists, compare "
                "bronze.ingest_log with the landing files of this hour"
            )
        elif acc.corrupt_files:  # a WARN: the readable lines are accounted for, downstream is not blocked
            description = (
                f"cannot be read to the end: {', '.join(acc.corrupt_files)}; its complete lines before the damage "
                "are accounted for (bronze.quarantine, reason corrupt_file, says where reading stopped). Have the "
                "producer re-deliver it: the hour is re-ingested when the file changes"
            )
        yield dg.AssetCheckResult(
            asset_key=TOPIC_KEYS[t],
            check_name=CHECK_ACCOUNTING,
            passed=description is None,
            severity=dg.AssetCheckSeverity.ERROR if not acc.balanced else dg.AssetCheckSeverity.WARN,
            description=description,
            metadata=acc.as_dict(),
        )
        added = report.topics[t].added_columns
        yield dg.AssetCheckResult(
            asset_key=TOPIC_KEYS[t],
            check_name=CHECK_SCHEMA_STABLE,
            passed=not added,
            severity=dg.AssetCheckSeverity.WARN,
            description=(f"columns added from the landing data: {added}" if added else None),
            metadata={"added_columns": dg.MetadataValue.json(added)},
        )
    rate = report.quarantined / report.lines if report.lines else 0.0
    yield dg.AssetCheckResult(
        asset_key=QUARANTINE_KEY,
        check_name=CHECK_QUARANTINE_RATE,
        passed=rate <= QUARANTINE_RATE_WARN,
        severity=dg.AssetCheckSeverity.WARN,
        description=None
        if rate <= QUARANTINE_RATE_WARN
        else f"{rate:.2%} of the hour's lines were quarantined (threshold {QUARANTINE_RATE_WARN:.0%})",
        metadata={
            "rate": round(rate, 6),
            "quarantined": report.quarantined,
            "lines": report.lines,
            "by_reason": dg.MetadataValue.json(report.quarantined_by_reason),
        },
    )
