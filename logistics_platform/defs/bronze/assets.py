"""The bronze assets: landing topics (external, observed) and the partitioned multi-asset that ingests them.

Thin glue: the work is :func:`logistics_platform.lib.bronze.ingest.ingest_hour`.
"""

# No `from __future__ import annotations`: Dagster reads the asset function annotations at runtime.

from collections.abc import Iterator
from typing import Any

import dagster as dg
from pyiceberg.schema import Schema

from logistics_platform.defs.bronze.checks import bronze_check_results, bronze_check_specs
from logistics_platform.defs.bronze.keys import LANDING_KEYS, QUARANTINE_KEY, TOPIC_KEYS
from logistics_platform.defs.constants import BRONZE_GROUP, INGEST_LOG_KEY, LANDING_GROUP, OWNERS
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.settings import Settings

INGEST_ASSET_NAME = "bronze_ingest"

_DESCRIPTIONS = {
    "tenants": "Tenant change events (Debezium CDC), typed, one row per valid landed line.",
    "couriers": "Courier change events (Debezium CDC), typed, one row per valid landed line.",
    "orders": "Order change events (Debezium CDC), typed, one row per valid landed line.",
    "payments": "Payment change events (Debezium CDC), typed, one row per valid landed line.",
    "tracking_pings": "Courier GPS pings, typed, one row per valid landed line.",
    bs.QUARANTINE_TABLE: "Every invalid landed line with its reason, record address and raw text.",
    bs.INGEST_LOG_TABLE: "One row per topic and arrival hour ingested: input files, fingerprint and counts.",
}


def column_schema(schema: Schema) -> dg.TableSchema:
    """Dagster column metadata from an Iceberg schema (names, types, docs)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=f.name,
                type=str(f.field_type),
                description=f.doc,
                constraints=dg.TableColumnConstraints(nullable=not f.required),
            )
            for f in schema.fields
        ]
    )


def _schemas() -> dict[str, Schema]:
    out = {t: bs.table_schema(spec) for t, spec in bs.TOPICS.items()}
    out[bs.QUARANTINE_TABLE] = bs.quarantine_schema()
    out[bs.INGEST_LOG_TABLE] = bs.ingest_log_schema()
    return out


def landing_specs(partitions: dg.PartitionsDefinition) -> list[dg.AssetSpec]:
    """The landing zone topics: written by Kafka Connect, observed here, never materialized by Dagster."""
    return [
        dg.AssetSpec(
            key=LANDING_KEYS[t],
            group_name=LANDING_GROUP,
            description=f"Kafka Connect JSON Lines files of topic {spec.topic} (topics/{spec.topic}/dt=/hr=).",
            kinds={"json"},
            owners=OWNERS,
            partitions_def=partitions,
            metadata={"topic": spec.topic},
        )
        for t, spec in bs.TOPICS.items()
    ]


def bronze_specs() -> list[dg.AssetSpec]:
    """One spec per bronze table, with its column schema and its landing topic(s) upstream."""
    schemas = _schemas()
    specs = []
    for name, key in [
        *TOPIC_KEYS.items(),
        (bs.QUARANTINE_TABLE, QUARANTINE_KEY),
        (bs.INGEST_LOG_TABLE, INGEST_LOG_KEY),
    ]:
        deps = [LANDING_KEYS[name]] if name in LANDING_KEYS else list(LANDING_KEYS.values())
        specs.append(
            dg.AssetSpec(
                key=key,
                group_name=BRONZE_GROUP,
                description=_DESCRIPTIONS[name],
                kinds={"iceberg"},
                owners=OWNERS,
                deps=deps,
                metadata={
                    "dagster/column_schema": column_schema(schemas[name]),
                    "dagster/table_name": f"{bs.NAMESPACE}.{name}",
                    "partition_spec": "day(_arrival_hour); one file set per arrival hour",
                },
            )
        )
    return specs


def build_bronze_assets(settings: Settings) -> dg.AssetsDefinition:
    """The partitioned multi-asset that ingests one arrival hour into every bronze table, with its checks."""
    partitions = arrival_hour_partitions(settings)

    @dg.multi_asset(
        name=INGEST_ASSET_NAME,
        specs=bronze_specs(),
        check_specs=bronze_check_specs(),
        partitions_def=partitions,
        can_subset=False,
        retry_policy=dg.RetryPolicy(
            max_retries=3, delay=15, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
        ),
        op_tags={"logistics/layer": "bronze"},
    )
    def bronze_ingest(
        context: dg.AssetExecutionContext, settings: dg.ResourceParam[Settings]
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        """Ingest one arrival hour of landing files into the bronze Iceberg tables (one commit per table)."""
        from logistics_platform.lib.bronze.accounting import account_hour
        from logistics_platform.lib.bronze.errors import describe_failure, is_transient
        from logistics_platform.lib.bronze.ingest import ingest_hour
        from logistics_platform.lib.bronze.landing import parse_partition_key
        from logistics_platform.lib.connections import load_catalog

        hour = parse_partition_key(context.partition_key)
        try:
            report = ingest_hour(settings, hour, run_id=context.run.run_id, progress=context.log.info)
        except Exception as exc:
            if is_transient(exc):
                raise  # the retry policy applies: catalog/storage unavailable, commit conflict, lock
            context.log.exception("ingest of %s failed", context.partition_key)
            raise dg.Failure(
                description=describe_failure(exc, f"ingest of arrival hour {context.partition_key}"),
                allow_retries=False,
            ) from None
        catalog = load_catalog(settings)

        def totals(table: str) -> dict[str, Any]:
            t = catalog.load_table(f"{bs.NAMESPACE}.{table}")
            snap = t.current_snapshot()
            total = int(snap.summary.additional_properties.get("total-records", 0)) if snap else 0
            return {
                "dagster/row_count": total,
                "snapshot_id": str(snap.snapshot_id) if snap else None,
                # the live schema: includes columns added by schema evolution
                "dagster/column_schema": column_schema(t.schema()),
            }

        for t, tr in report.topics.items():
            yield dg.MaterializeResult(
                asset_key=TOPIC_KEYS[t],
                metadata={
                    **totals(t),
                    "dagster/partition_row_count": tr.rows,
                    "lines": tr.lines,
                    "rows": tr.rows,
                    "quarantined": tr.quarantined,
                    "quarantined_by_reason": dg.MetadataValue.json(tr.quarantined_by_reason),
                    "tombstones": tr.tombstones,
                    "late_events": tr.late_events,
                    "files_read": len(tr.files),
                    "bytes_read": tr.bytes,
                    "input_fingerprint": tr.fingerprint,
                    "data_files_written": tr.data_files,
                    "commit_attempts": tr.commit_attempts,
                    "added_columns": dg.MetadataValue.json(tr.added_columns),
                    "corrupt_files": dg.MetadataValue.json(tr.corrupt_files),
                    "duration_seconds": round(report.duration_seconds, 3),
                },
            )
        yield dg.MaterializeResult(
            asset_key=QUARANTINE_KEY,
            metadata={
                **totals(bs.QUARANTINE_TABLE),
                "dagster/partition_row_count": report.quarantined,
                "quarantined_by_reason": dg.MetadataValue.json(report.quarantined_by_reason),
                "quarantined_by_topic": dg.MetadataValue.json({t: r.quarantined for t, r in report.topics.items()}),
                "lines": report.lines,
                "duration_seconds": round(report.duration_seconds, 3),
            },
        )
        yield dg.MaterializeResult(
            asset_key=INGEST_LOG_KEY,
            metadata={
                **totals(bs.INGEST_LOG_TABLE),
                "lines": report.lines,
                "rows": report.rows,
                "quarantined": report.quarantined,
                "tombstones": report.tombstones,
                "late_events": sum(t.late_events for t in report.topics.values()),
                "files_read": sum(len(t.files) for t in report.topics.values()),
                "bytes_read": sum(t.bytes for t in report.topics.values()),
                "snapshot_ids": dg.MetadataValue.json(
                    {
                        **{t: str(r.snapshot_id) for t, r in report.topics.items()},
                        bs.QUARANTINE_TABLE: str(report.quarantine_snapshot_id),
                        bs.INGEST_LOG_TABLE: str(report.ingest_log_snapshot_id),
                    }
                ),
                "duration_seconds": round(report.duration_seconds, 3),
            },
        )

        accounts = account_hour(settings, hour)
        yield from bronze_check_results(report, accounts)

    return bronze_ingest
