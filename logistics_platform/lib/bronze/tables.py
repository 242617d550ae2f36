"""The bronze tables' lifecycle: created on first use, properties migrated, columns added by schema evolution."""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import IcebergType

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.commit import retry_on_conflict
from logistics_platform.lib.maintenance.options import DEFAULT_METADATA_PREVIOUS_VERSIONS as METADATA_PREVIOUS_VERSIONS

TABLE_PROPERTIES = {
    "write.parquet.compression-codec": "zstd",
    # Level 1 (Arrow's default, made explicit): level 3 costs a fifth more write CPU for no smaller files once
    # dictionaries are bounded (benchmarks/parquet_encoding.py); negative levels write a quarter more bytes.
    "write.parquet.compression-level": "1",
    # Ids, offsets, timestamps and coordinates are nearly unique per row: a dictionary of them grows to the limit
    # and is then abandoned for plain encoding, wasted work that also leaves larger files. A small limit keeps
    # dictionaries for the columns that repeat (tenants, couriers, regions, statuses, topic, file) and gives up
    # on the others after the first write batch. Values are unchanged; only their encoding in the files is.
    "write.parquet.dict-size-bytes": str(64 * 1024),
    # Let pyiceberg write one file per flushed batch: the batch size bounds memory, not this.
    "write.target-file-size-bytes": str(512 * 1024 * 1024),
    # Writers of different hours of one day touch disjoint files; serializable isolation would reject them as
    # conflicts at day-partition granularity. Snapshot isolation still fails a commit whose deleted files were
    # changed concurrently (two runs of the same hour): the retry then re-plans on fresh metadata.
    "write.update.isolation-level": "snapshot",
    "write.delete.isolation-level": "snapshot",
    # Conflicts are retried by commit.replace_hours, which re-plans the hour's files on fresh metadata; pyiceberg's
    # own retry would re-apply a plan made on stale metadata.
    "commit.retry.num-retries": "0",
    # Live micro-batches commit every few seconds. Each commit deletes the metadata.json files that fall out of a
    # short metadata log (a dbt run binds its bronze views to one and reads it for minutes: the log outlasts that
    # at a sink's cadence), ...
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": str(METADATA_PREVIOUS_VERSIONS),
    # ... and appends merge the small manifests once this many pile up, so that planning an hour reads a bounded
    # number of them between two nightly consolidations (lib/maintenance/manifests.py orders them by partition).
    "commit.manifest-merge.enabled": "true",
    "commit.manifest.min-count-to-merge": "8",
}


def ensure_table(catalog: Catalog, identifier: str, schema: Schema, hour_column: str, sort_column: str) -> Table:
    """Load a bronze table, creating it (schema, day partitions on the hour column, sort order) on first use."""
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        pass
    else:
        stale = {k: v for k, v in TABLE_PROPERTIES.items() if table.properties.get(k) != v}
        if stale:  # tables created by an older version of this module
            with table.transaction() as tx:
                tx.set_properties(stale)
            table = catalog.load_table(identifier)
        return table
    try:
        return catalog.create_table(
            identifier,
            schema=schema,
            partition_spec=bs.partition_spec(schema, hour_column),
            sort_order=bs.sort_order(schema, sort_column),
            properties=TABLE_PROPERTIES,
        )
    except TableAlreadyExistsError:  # a concurrent run created it first
        return catalog.load_table(identifier)


def ensure_bronze_tables(catalog: Catalog) -> dict[str, Table]:
    """Every bronze table (topics, quarantine, ingest log), created when missing."""
    tables = {
        t: ensure_table(catalog, spec.identifier, bs.table_schema(spec), "_arrival_hour", "_event_time")
        for t, spec in bs.TOPICS.items()
    }
    tables[bs.QUARANTINE_TABLE] = ensure_table(
        catalog, f"{bs.NAMESPACE}.{bs.QUARANTINE_TABLE}", bs.quarantine_schema(), "_arrival_hour", "_offset"
    )
    tables[bs.INGEST_LOG_TABLE] = ensure_table(
        catalog, f"{bs.NAMESPACE}.{bs.INGEST_LOG_TABLE}", bs.ingest_log_schema(), "arrival_hour", "arrival_hour"
    )
    return tables


def evolved_columns(table: Table, spec: bs.TopicSpec) -> dict[str, IcebergType]:
    """Columns the table gained beyond the contract (schema evolution), in table order."""
    contract = {c.name for c in spec.columns} | {c.name for c in bs.metadata_columns(spec)}
    return {f.name: f.field_type for f in table.schema().fields if f.name not in contract}


def add_columns(catalog: Catalog, identifier: str, columns: dict[str, IcebergType], origin: str) -> dict[str, str]:
    """Additive schema evolution: add the columns the table does not have yet (types of existing ones win)."""
    added: dict[str, str] = {}

    def attempt(_: int) -> None:
        added.clear()
        table = catalog.load_table(identifier)
        existing = {f.name for f in table.schema().fields}
        missing = {n: t for n, t in columns.items() if n not in existing}
        if not missing:
            return
        with table.update_schema() as update:
            for name, typ in missing.items():
                update.add_column((name,), typ, doc=f"Added by schema evolution; first seen in {origin}.")
                added[name] = str(typ)

    retry_on_conflict(f"{identifier}: add columns {sorted(columns)}", attempt)
    return dict(added)
