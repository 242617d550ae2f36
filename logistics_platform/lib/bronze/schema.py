"""The bronze side of the source contract (:mod:`logistics_platform.lib.contract`, typed for Iceberg): topics, metadata
columns, quarantine reasons and partitioning, for everything that reads or writes bronze.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import (
    BooleanType,
    DecimalType,
    DoubleType,
    IcebergType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

from logistics_platform.lib import contract

NAMESPACE = "bronze"
QUARANTINE_TABLE = "quarantine"
INGEST_LOG_TABLE = "ingest_log"

# Quarantine reasons (docs/contract/sources.md); invalid_value and incompatible_type are suffixed with ":<column>".
REASON_MALFORMED_JSON = "malformed_json"
REASON_INVALID_OP = "invalid_op"
REASON_MISSING_KEY = "missing_key"
REASON_INVALID_VALUE = "invalid_value"
REASON_INCOMPATIBLE_TYPE = "incompatible_type"  # a type change the column cannot take: a schema incident
REASON_INVALID_ENVELOPE = "invalid_envelope"
# A file that cannot be read to its end: one row for the file, not for a line (its readable lines are ingested).
REASON_CORRUPT_FILE = "corrupt_file"


@dataclass(frozen=True)
class Column:
    name: str
    type: IcebergType
    doc: str
    required: bool = False


@dataclass(frozen=True)
class TopicSpec:
    """One landing topic and the bronze table it feeds."""

    table: str
    topic: str
    key: str  # "" for a topic outside the contract: its rows have no declared key
    columns: tuple[Column, ...]
    cdc: bool = True

    @property
    def identifier(self) -> str:
        return f"{NAMESPACE}.{self.table}"


_ICEBERG_TYPES: dict[str, IcebergType] = {
    contract.TEXT_NAME: StringType(),
    contract.BIGINT_NAME: LongType(),
    contract.BOOLEAN_NAME: BooleanType(),
    contract.DOUBLE_NAME: DoubleType(),
    # Bronze keeps instants as UTC timestamps without a zone (what DuckDB and dbt read as TIMESTAMP).
    contract.TIMESTAMPTZ_NAME: TimestampType(),
}


def iceberg_type(t: contract.ColumnType) -> IcebergType:
    """The bronze Iceberg type of a contract type."""
    if t.is_decimal:
        assert t.precision is not None and t.scale is not None  # numeric() always sets both
        return DecimalType(t.precision, t.scale)
    return _ICEBERG_TYPES[t.name]


def topic_spec(source: contract.SourceTopic) -> TopicSpec:
    """The bronze side of a contract topic (all columns optional: a delete carries only the key)."""
    return TopicSpec(
        table=source.table,
        topic=source.topic,
        key=source.key,
        columns=tuple(Column(c.name, iceberg_type(c.type), c.doc) for c in source.columns),
        cdc=source.cdc,
    )


TOPICS: dict[str, TopicSpec] = {table: topic_spec(source) for table, source in contract.SOURCES.items()}
TOPIC_BY_NAME: dict[str, TopicSpec] = {spec.topic: spec for spec in TOPICS.values()}


def spec_of(topic: str) -> TopicSpec:
    """The contract's topic, else one outside it: bronze.extra_<topic> (lower case, each run outside a-z0-9 one _)."""
    extra = TopicSpec(contract.EXTRA_PREFIX + re.sub(r"[^a-z0-9]+", "_", topic.lower()).strip("_"), topic, "", ())
    return TOPIC_BY_NAME.get(topic, extra)


# Metadata columns, in table order after the row columns. All are pure functions of the landing files.
ADDRESS_COLUMNS: tuple[Column, ...] = (
    Column("_topic", StringType(), "Kafka topic of the landed line.", True),
    Column("_kafka_partition", IntegerType(), "Kafka partition, from the file name.", True),
    Column("_offset", LongType(), "Kafka offset of the line: start offset of the file + line index.", True),
    Column("_source_file", StringType(), "Landing file, relative to the landing root.", True),
)
EVENT_COLUMNS: tuple[Column, ...] = (
    Column("_event_id", StringType(), "Hash of the event identity: equal for redelivered copies.", True),
    Column("_event_time", TimestampType(), "Event time: source.ts_ms for CDC, recorded_at for pings (UTC).", True),
    Column("_arrival_hour", TimestampType(), "Arrival hour (UTC) from the dt=/hr= folder.", True),
    Column("_is_late", BooleanType(), "Event time earlier than arrival hour start minus allowed lateness.", True),
    Column("_lateness_seconds", LongType(), "max(0, arrival hour start - event time) in seconds.", True),
)
CDC_COLUMNS: tuple[Column, ...] = (
    Column("_op", StringType(), "Debezium op: c, u, d, r or t (truncate: no key, no row).", True),
    Column("_lsn", LongType(), "source.lsn: orders the changes of one row.", True),
    Column("_tx_id", LongType(), "source.txId of the OLTP transaction."),
    Column("_connector_ts", TimestampType(), "Envelope ts_ms: when the connector processed the change."),
)


def metadata_columns(spec: TopicSpec) -> tuple[Column, ...]:
    return ADDRESS_COLUMNS + EVENT_COLUMNS + (CDC_COLUMNS if spec.cdc else ())


def _schema(columns: tuple[Column, ...]) -> Schema:
    return Schema(
        *(
            NestedField(field_id=i, name=c.name, field_type=c.type, required=c.required, doc=c.doc)
            for i, c in enumerate(columns, start=1)
        )
    )


def table_schema(spec: TopicSpec) -> Schema:
    """Iceberg schema of a bronze data table: row columns, then metadata columns."""
    return _schema(spec.columns + metadata_columns(spec))


QUARANTINE_COLUMNS: tuple[Column, ...] = (
    *ADDRESS_COLUMNS,
    Column("_arrival_hour", TimestampType(), "Arrival hour (UTC) from the dt=/hr= folder.", True),
    Column("reason", StringType(), "Why the line was rejected (sources.md reasons).", True),
    Column("error_detail", StringType(), "What exactly was wrong, for a person."),
    Column("raw_line", StringType(), "The line as landed: text, or base64 when not valid UTF-8.", True),
    Column("raw_encoding", StringType(), "utf-8 or base64.", True),
)

INGEST_LOG_COLUMNS: tuple[Column, ...] = (
    Column("topic", StringType(), "Landing topic.", True),
    Column("arrival_hour", TimestampType(), "Arrival hour (UTC) that was ingested.", True),
    Column("files", StringType(), "JSON list of [relative path, size] of the input files.", True),
    Column("fingerprint", StringType(), "Hash of the input file set (names and sizes).", True),
    Column("file_count", IntegerType(), "Number of input files.", True),
    Column("bytes", LongType(), "Bytes read.", True),
    Column("lines", LongType(), "Lines landed.", True),
    Column("rows", LongType(), "Rows written to the bronze table.", True),
    Column("quarantined", LongType(), "Lines written to bronze.quarantine.", True),
    Column("tombstones", LongType(), "Tombstone lines (counted, not stored).", True),
    Column("late_events", LongType(), "Rows flagged late.", True),
)


def quarantine_schema() -> Schema:
    return _schema(QUARANTINE_COLUMNS)


def ingest_log_schema() -> Schema:
    return _schema(INGEST_LOG_COLUMNS)


def partition_spec(schema: Schema, column: str = "_arrival_hour") -> PartitionSpec:
    """Day partitions on the arrival hour: an hour's replace touches one partition, compaction merges a day."""
    source_id = schema.find_field(column).field_id
    return PartitionSpec(
        PartitionField(source_id=source_id, field_id=1000, transform=DayTransform(), name=f"{column}_day")
    )


def sort_order(schema: Schema, column: str = "_event_time") -> SortOrder:
    """Compaction sorts by event time so that event-time scans prune files by their min/max."""
    return SortOrder(SortField(source_id=schema.find_field(column).field_id, transform=IdentityTransform()))
