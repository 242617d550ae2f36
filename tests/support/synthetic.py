"""Bronze-shaped synthetic rows for maintenance tests and benchmarks (many small hourly commits, fast).

The real pipeline writes bronze through the ingest; maintenance only needs tables that look like bronze
(same schema, partitioning and sort order) with many small files, which this builds without landing files.
"""

from __future__ import annotations

import hashlib
import random
from datetime import datetime, timedelta
from decimal import Decimal

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.table import Table
from pyiceberg.types import BooleanType, DecimalType, DoubleType, IntegerType, LongType, StringType, TimestampType

from logistics_platform.lib.bronze import schema as bs

REGIONS = ("north", "south", "east", "west", "central")


def create_bronze_table(catalog: Catalog, table: str = "orders", namespace: str = "bronze") -> Table:
    """A table with the bronze contract's schema, day(_arrival_hour) partitioning and event-time sort order."""
    spec = bs.TOPICS[table]
    schema = bs.table_schema(spec)
    return catalog.create_table(
        f"{namespace}.{table}",
        schema=schema,
        partition_spec=bs.partition_spec(schema),
        sort_order=bs.sort_order(schema),
    )


def _value(type_: object, name: str, rng: random.Random, i: int, hour: datetime) -> object:
    if name == "region":
        return REGIONS[rng.randrange(len(REGIONS))]
    if isinstance(type_, StringType):
        return f"{name}-{rng.randrange(1000)}"
    if isinstance(type_, LongType):
        return rng.randrange(1, 10**9)
    if isinstance(type_, IntegerType):
        return rng.randrange(0, 12)
    if isinstance(type_, DoubleType):
        return rng.uniform(-50, 50)
    if isinstance(type_, BooleanType):
        return rng.random() < 0.1
    if isinstance(type_, DecimalType):
        return Decimal(rng.randrange(100, 100000)) / 100
    if isinstance(type_, TimestampType):
        return hour - timedelta(seconds=rng.randrange(0, 7200))
    raise TypeError(f"no synthetic value for {name}: {type_}")


def hour_rows(table: Table, arrival_hour: datetime, rows: int, seed: int = 0) -> pa.Table:
    """``rows`` bronze-shaped rows that arrived in ``arrival_hour`` (columns follow the table's current schema)."""
    rng = random.Random(f"{seed}-{arrival_hour.isoformat()}")
    schema = table.schema()
    columns: dict[str, list[object]] = {f.name: [] for f in schema.fields}
    for i in range(rows):
        event_time = arrival_hour + timedelta(seconds=rng.randrange(0, 3600))
        for f in schema.fields:
            if f.name == "_arrival_hour":
                v: object = arrival_hour
            elif f.name == "_event_time":
                v = event_time
            elif f.name == "_event_id":
                v = hashlib.sha1(f"{seed}-{arrival_hour}-{i}".encode()).hexdigest()
            elif f.name == "_offset":
                v = i
            elif f.name == "_topic":
                v = "synthetic"
            else:
                v = _value(f.field_type, f.name, rng, i, arrival_hour)
            columns[f.name].append(v)
    return pa.Table.from_pydict(columns, schema=schema_to_pyarrow(schema, include_field_ids=False))


def append_hour(table: Table, arrival_hour: datetime, rows: int, seed: int = 0) -> None:
    """Append one hour of rows as its own commit (one small file), like an hourly ingest does."""
    table.append(hour_rows(table, arrival_hour, rows, seed))


def replace_hour(table: Table, arrival_hour: datetime, rows: int, seed: int = 0) -> None:
    """Replace exactly one arrival hour (what a re-ingest of that hour does)."""
    hour_filter = f"_arrival_hour = '{arrival_hour.isoformat()}'"
    table.overwrite(hour_rows(table, arrival_hour, rows, seed), overwrite_filter=hour_filter)
