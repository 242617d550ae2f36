"""The bronze assets: landing topics (external, observed) and the partitioned multi-asset that ingests them (thin
glue: the work is :func:`logistics_platform.lib.bronze.ingest.ingest_hours`)."""

# No `from __future__ import annotations`: Dagster reads the asset function annotations at runtime.

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import dagster as dg
from pyiceberg.catalog import Catalog
from pyiceberg.schema import Schema

from logistics_platform.defs.bronze.checks import bronze_check_results, bronze_check_specs, reason_counts
from logistics_platform.defs.bronze.keys import EXTRA_KEY, LANDING_KEYS, QUARANTINE_KEY, TOPIC_KEYS
from logistics_platform.defs.constants import BRONZE_GROUP, INGEST_LOG_KEY, LANDING_GROUP, OWNERS
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.defs.preflight import require_usable_lakehouse
from logistics_platform.lib import contract
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.views import bronze_tables
from logistics_platform.resources import IcebergCatalog
from logistics_platform.settings import Settings

if TYPE_CHECKING:  # the ingest step imports them; loading the definitions does not need them
    from logistics_platform.lib.bronze.ingest import IngestOptions
    from logistics_platform.lib.bronze.reports import IngestReport

INGEST_ASSET_NAME = "bronze_ingest"
# A run with this tag set to "replace", or any run of a backfill, re-ingests its hours whole; others may append.
INGEST_MODE_TAG = "logistics/ingest-mode"
BACKFILL_TAG = "dagster/backfill"
_COUNTS = ("lines", "rows", "quarantined", "tombstones", "late_events")  # of the hours as they stand after a run

EXTRA_TABLES = f"{contract.EXTRA_PREFIX}*"  # the tables of topics outside the contract, one asset
_DESCRIPTIONS = {
    **{t: f"{source.description}, typed, one row per valid landed line." for t, source in contract.SOURCES.items()},
    EXTRA_TABLES: "Each topic outside the source contract, a table bronze.extra_<topic> of its records' own columns "
    "and the envelope's metadata columns (docs/contract/sources.md section 8).",
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
    keys = {**TOPIC_KEYS, EXTRA_TABLES: EXTRA_KEY, bs.QUARANTINE_TABLE: QUARANTINE_KEY}
    keys[bs.INGEST_LOG_TABLE] = INGEST_LOG_KEY
    schemas = {**bronze_tables(), EXTRA_TABLES: bs.table_schema(bs.spec_of(""))}  # the columns every extra table has
    return [
        dg.AssetSpec(
            key=keys[name],
            group_name=BRONZE_GROUP,
            description=_DESCRIPTIONS[name],
            kinds={"iceberg"},
            owners=OWNERS,
            deps=[k for t, k in LANDING_KEYS.items() if name in (t, bs.QUARANTINE_TABLE, bs.INGEST_LOG_TABLE)],
            metadata={
                "dagster/column_schema": column_schema(schema),
                "dagster/table_name": f"{bs.NAMESPACE}.{name}",
                "partition_spec": "day(_arrival_hour); one file set per arrival hour",
            },
        )
        for name, schema in schemas.items()
    ]


def build_bronze_assets(settings: Settings) -> dg.AssetsDefinition:
    """The partitioned multi-asset that ingests arrival hours (one, or a range of up to
    ``INGEST_MAX_HOURS_PER_RUN``) into every bronze table, with its checks; one commit per table per run."""
    partitions = arrival_hour_partitions(settings)

    @dg.multi_asset(
        name=INGEST_ASSET_NAME,
        specs=bronze_specs(),
        check_specs=bronze_check_specs(),
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=settings.ingest_max_hours_per_run),
        can_subset=False,
        retry_policy=dg.RetryPolicy(
            max_retries=3, delay=15, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
        ),
        op_tags={"logistics/layer": "bronze"},
    )
    def bronze_ingest(
        context: dg.AssetExecutionContext, iceberg: IcebergCatalog, settings: dg.ResourceParam[Settings]
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        """Ingest arrival hours of landing files into the bronze Iceberg tables (one commit per table per run)."""
        from logistics_platform.lib.bronze.accounting import account_ingest
        from logistics_platform.lib.bronze.errors import describe_failure, is_transient
        from logistics_platform.lib.bronze.ingest import ingest_hours
        from logistics_platform.lib.timekeys import parse_hour_key

        require_usable_lakehouse(settings)
        catalog = iceberg.get_catalog()  # one for the run: the ingest, the metadata and the accounting share it
        keys, tags = context.partition_keys, context.run.tags
        label = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
        options: IngestOptions = {
            "run_id": context.run.run_id,
            "replace": BACKFILL_TAG in tags or tags.get(INGEST_MODE_TAG) == "replace",
            "progress": context.log.info,
            "catalog": catalog,
        }
        try:
            reports = ingest_hours(settings, [parse_hour_key(k) for k in keys], **options)
        except Exception as exc:
            if is_transient(exc):
                raise  # the retry policy applies: catalog/storage unavailable, commit conflict, lock
            context.log.exception("ingest of %s failed", label)
            what = f"ingest of arrival hour{'s' if len(keys) > 1 else ''} {label.replace('..', ' .. ')}"
            raise dg.Failure(description=describe_failure(exc, what), allow_retries=False) from None
        yield from materializations(catalog, reports)
        accounts = account_ingest(settings, reports, catalog)
        yield from bronze_check_results(reports, accounts)

    return bronze_ingest


def materializations(catalog: Catalog, reports: "Sequence[IngestReport]") -> Iterator[dg.MaterializeResult]:
    """One result per bronze asset; its metadata sums the run's hours (Dagster records it for each hour)."""

    def totals(table: str) -> dict[str, Any]:
        t = catalog.load_table(f"{bs.NAMESPACE}.{table}")
        snap, live = t.current_snapshot(), t.schema()
        # Only an evolved schema is recorded: Dagster writes this metadata once per hour of the run.
        evolved = [f.name for f in live.fields] != [f.name for f in bronze_tables()[table].fields]
        return {
            "dagster/row_count": int(snap.summary.additional_properties.get("total-records", 0)) if snap else 0,
            "snapshot_id": str(snap.snapshot_id) if snap else None,
            **({"dagster/column_schema": column_schema(live)} if evolved else {}),  # evolved columns included
        }

    def tsum(name: str, attr: str) -> int:
        return sum(getattr(r.topics[name], attr) for r in reports)

    def merged(name: str, attr: str) -> dg.JsonMetadataValue:
        return dg.MetadataValue.json({k: v for r in reports for k, v in getattr(r.topics[name], attr).items()})

    def read(topics: Sequence[str]) -> dict[str, int]:
        """What this run read: all files of a replaced hour, the new ones of an appended one."""
        read_files = [f for r in reports for t in topics for f in r.topics[t].read_files]
        lines = sum(tsum(t, "read_lines") for t in topics)
        return {"files_read": len(read_files), "bytes_read": sum(size for _, size in read_files), "lines_read": lines}

    duration = {"duration_seconds": round(max(r.duration_seconds for r in reports), 3)}
    hours = {"arrival_hours": len(reports)} if len(reports) > 1 else {}
    first, single = reports[0], len(reports) == 1
    # append (only the new files read) | replace (the whole hour read) | unchanged (nothing new); a range: counts
    mode = {"ingest_mode": first.mode if single else dg.MetadataValue.json(dict(Counter(r.mode for r in reports)))}
    extra = [t for t in first.topics if t not in TOPIC_KEYS]  # the topics outside the contract: one asset
    meta = {**hours, **{k: sum(tsum(t, k) for t in extra) for k in _COUNTS}, **read(extra), **duration}
    rows = dg.MetadataValue.json({f"{bs.NAMESPACE}.{t}": tsum(t, "rows") for t in extra})
    yield dg.MaterializeResult(asset_key=EXTRA_KEY, metadata={**meta, "rows_by_table": rows})
    for t in (t for t in first.topics if t not in extra):
        yield dg.MaterializeResult(
            asset_key=TOPIC_KEYS[t],
            metadata={
                **totals(t),
                "dagster/partition_row_count": tsum(t, "rows"),
                **hours,
                **mode,
                **{k: tsum(t, k) for k in _COUNTS},  # the hours as they stand after the run
                "quarantined_by_reason": reason_counts(r.topics[t].quarantined_by_reason for r in reports),
                **read([t]),
                # a range's are in bronze.ingest_log and the commit's snapshot summary (not copied to every hour)
                **({"input_fingerprint": first.topics[t].fingerprint} if single else {}),
                "data_files_written": tsum(t, "data_files"),
                "commit_attempts": first.topics[t].commit_attempts,
                "commit_seconds": first.commit_seconds.get(t, 0.0),
                "added_columns": merged(t, "added_columns"),
                "corrupt_files": merged(t, "corrupt_files"),
                **duration,
            },
        )
    yield dg.MaterializeResult(
        asset_key=QUARANTINE_KEY,
        metadata={
            **totals(bs.QUARANTINE_TABLE),
            "dagster/partition_row_count": sum(r.quarantined for r in reports),
            **hours,
            "quarantined_by_reason": reason_counts(r.quarantined_by_reason for r in reports),
            "quarantined_by_topic": dg.MetadataValue.json({t: tsum(t, "quarantined") for t in first.topics}),
            "lines": sum(r.lines for r in reports),
            "commit_seconds": first.commit_seconds.get(bs.QUARANTINE_TABLE, 0.0),
            **duration,
        },
    )
    snapshot_ids = {t: r.snapshot_id for t, r in first.topics.items()}
    snapshot_ids[bs.QUARANTINE_TABLE] = first.quarantine_snapshot_id
    snapshot_ids[bs.INGEST_LOG_TABLE] = first.ingest_log_snapshot_id
    yield dg.MaterializeResult(
        asset_key=INGEST_LOG_KEY,
        metadata={
            **totals(bs.INGEST_LOG_TABLE),
            **hours,
            **mode,
            **({"ingest_mode_reason": first.mode_reason} if single else {}),
            **{k: sum(tsum(t, k) for t in first.topics) for k in _COUNTS},
            **read(list(first.topics)),
            "snapshot_ids": dg.MetadataValue.json({t: str(i) for t, i in snapshot_ids.items()}),
            "commit_seconds": first.commit_seconds.get(bs.INGEST_LOG_TABLE, 0.0),
            **duration,
        },
    )
