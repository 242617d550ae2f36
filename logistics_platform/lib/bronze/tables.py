"""The bronze tables' lifecycle: created on first use, properties migrated, columns added or promoted (evolution)."""

from __future__ import annotations

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError, TableAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import IcebergType

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.commit import retry_on_conflict
from logistics_platform.lib.bronze.values import promotion
from logistics_platform.lib.bronze.views import bronze_tables
from logistics_platform.lib.maintenance.options import DEFAULT_METADATA_PREVIOUS_VERSIONS as METADATA_PREVIOUS_VERSIONS

# Why each value: docs/internals/ingest.md, "Commits".
TABLE_PROPERTIES = {
    "write.parquet.compression-codec": "zstd",
    "write.parquet.compression-level": "1",
    "write.parquet.dict-size-bytes": str(64 * 1024),
    "write.target-file-size-bytes": str(512 * 1024 * 1024),
    "write.update.isolation-level": "snapshot",
    "write.delete.isolation-level": "snapshot",
    "commit.retry.num-retries": "0",  # commit.commit_hours re-plans on fresh metadata instead
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": str(METADATA_PREVIOUS_VERSIONS),
    "commit.manifest-merge.enabled": "true",
    "commit.manifest.min-count-to-merge": "8",
}


def hour_column(table: str) -> str:
    """The arrival-hour column of bronze table ``table`` (by name)."""
    return "arrival_hour" if table == bs.INGEST_LOG_TABLE else "_arrival_hour"


def ensure_table(catalog: Catalog, identifier: str, schema: Schema, hour_column: str, sort_column: str) -> Table:
    """Load a bronze table, creating it (schema, day partitions on the hour column, sort order) on first use."""
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
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
    stale = {k: v for k, v in TABLE_PROPERTIES.items() if table.properties.get(k) != v}
    if stale:  # tables created by an older version of this module
        table.transaction().set_properties(stale).commit_transaction()
    return table


def ensure_bronze_tables(catalog: Catalog, specs: dict[str, bs.TopicSpec] = bs.TOPICS) -> dict[str, Table]:
    """Every bronze table (topics, also ``specs``' outside the contract; quarantine, ingest log), created if missing."""
    sort = {bs.QUARANTINE_TABLE: "_offset", bs.INGEST_LOG_TABLE: "arrival_hour"}
    schemas = {**bronze_tables(), **{name: bs.table_schema(spec) for name, spec in specs.items()}}
    return {
        name: ensure_table(catalog, f"{bs.NAMESPACE}.{name}", schema, hour_column(name), sort.get(name, "_event_time"))
        for name, schema in schemas.items()
    }


def evolved_columns(table: Table, spec: bs.TopicSpec) -> dict[str, IcebergType]:
    """Columns the table gained beyond the contract (schema evolution) or promoted (type promotion), in table order."""
    contract = {c.name: c.type for c in spec.columns + bs.metadata_columns(spec)}
    return {f.name: f.field_type for f in table.schema().fields if contract.get(f.name) != f.field_type}


def add_columns(catalog: Catalog, identifier: str, columns: dict[str, IcebergType], origin: str) -> dict[str, str]:
    """Schema evolution: add the columns the table does not have yet, promote those whose given type is a promotion
    of theirs (values.promotion; any other type of an existing column wins). Returns column -> what it became."""
    changed: dict[str, str] = {}

    def attempt(_: int) -> None:
        changed.clear()
        table = catalog.load_table(identifier)
        now = {f.name: f.field_type for f in table.schema().fields}
        todo = {n: t for n, t in columns.items() if n not in now or promotion(now[n], t)}
        if not todo:
            return
        with table.update_schema() as update:
            for name, typ in todo.items():
                if name in now:  # in place: Iceberg reads the older data files' values as the wider type
                    update.update_column((name,), field_type=typ)
                    changed[name] = f"{typ} (promoted from {now[name]})"
                else:
                    update.add_column((name,), typ, doc=f"Added by schema evolution; first seen in {origin}.")
                    changed[name] = str(typ)

    retry_on_conflict(f"{identifier}: evolve columns {sorted(columns)}", attempt)
    return dict(changed)
