"""Publish the DuckDB marts to the Iceberg namespace ``marts`` so that other engines read the same results.

Every mart is one atomic Iceberg commit. ``marts.fct_orders`` is partitioned by ``bucket(order_id)`` and only the
buckets whose rows changed are rewritten: a per-bucket fingerprint (row count + XOR of row hashes, computed in
DuckDB) is stored in a table property in the same commit, and the next publish replaces the data files of exactly
the buckets whose fingerprint differs (an overwrite snapshot deleting those buckets' files and adding new ones).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType

from logistics_platform.lib.transform.project import MART_MODELS

NAMESPACE = "marts"
ORDERS_MART = "fct_orders"
ORDER_BUCKETS = 16
FINGERPRINT_PROPERTY = "logistics.bucket-fingerprints"
BUCKET_COLUMN = "_bucket"


@dataclass
class PublishReport:
    """What publishing one mart did."""

    table: str
    rows: int
    snapshot_id: int | None
    seconds: float
    buckets_rewritten: list[int] = field(default_factory=list)
    buckets_total: int = 0


def _read_mart(con: duckdb.DuckDBPyConnection, mart: str) -> pa.Table:
    return con.sql(f"select * from marts.{mart}").fetch_arrow_table()


def _load_or_create(catalog: Catalog, identifier: str, schema: pa.Schema, bucket_column: str | None = None) -> Table:
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        table = catalog.create_table(identifier, schema=schema)
        if bucket_column is not None:
            # Field ids exist only once the Arrow schema is converted: create, then add the bucket partition.
            with table.update_spec() as update:
                update.add_field(bucket_column, BucketTransform(ORDER_BUCKETS), f"{bucket_column}_bucket")
            table = catalog.load_table(identifier)
        return table


def publish_full(catalog: Catalog, con: duckdb.DuckDBPyConnection, mart: str) -> PublishReport:
    """Replace the whole Iceberg table with the DuckDB mart in one overwrite commit."""
    started = time.perf_counter()
    data = _read_mart(con, mart)
    table = _load_or_create(catalog, f"{NAMESPACE}.{mart}", data.schema)
    props = {"logistics.source": f"duckdb marts.{mart}"}
    if table.current_snapshot() is None:
        table.append(data, snapshot_properties=props)
    else:
        table.overwrite(data, snapshot_properties=props)
    snap = table.current_snapshot()
    return PublishReport(mart, data.num_rows, snap.snapshot_id if snap else None, time.perf_counter() - started)


def order_buckets(order_ids: pa.Array, buckets: int = ORDER_BUCKETS) -> pa.Array:
    """Iceberg bucket numbers of order ids (the same murmur3 bucketing the table's partition spec uses)."""
    return BucketTransform(buckets).pyarrow_transform(LongType())(order_ids)


def bucket_fingerprints(con: duckdb.DuckDBPyConnection, rows: pa.Table) -> dict[int, str]:
    """Bucket -> 'count:xor-of-row-hashes' of the rows (order-independent, so equal data = equal fingerprint)."""
    columns = ", ".join(f'"{c}"' for c in rows.column_names if c != BUCKET_COLUMN)
    con.register("publish_rows", rows)
    try:
        result = con.sql(
            f"select {BUCKET_COLUMN}, count(*), bit_xor(hash({columns})) from publish_rows group by all"
        ).fetchall()
    finally:
        con.unregister("publish_rows")
    return {int(b): f"{n}:{h}" for b, n, h in result}


def publish_orders(catalog: Catalog, con: duckdb.DuckDBPyConnection) -> PublishReport:
    """Publish fct_orders bucketed by order_id, rewriting only the buckets whose rows changed."""
    started = time.perf_counter()
    data = _read_mart(con, ORDERS_MART)
    identifier = f"{NAMESPACE}.{ORDERS_MART}"
    table = _load_or_create(catalog, identifier, data.schema, bucket_column="order_id")
    with_bucket = data.append_column(BUCKET_COLUMN, order_buckets(data.column("order_id")))
    current = bucket_fingerprints(con, with_bucket)
    published: dict[str, str] = json.loads(table.properties.get(FINGERPRINT_PROPERTY, "{}"))
    changed = sorted(b for b in set(current) | {int(k) for k in published} if current.get(b) != published.get(str(b)))
    report = PublishReport(ORDERS_MART, data.num_rows, None, 0.0, changed, ORDER_BUCKETS)
    if not changed and table.current_snapshot() is not None:
        snap = table.current_snapshot()
        report.snapshot_id = snap.snapshot_id if snap else None
        report.seconds = time.perf_counter() - started
        return report

    changed_set = pa.array(changed, type=pa.int32())
    rows = with_bucket.filter(pc.is_in(with_bucket.column(BUCKET_COLUMN), value_set=changed_set))
    rows = rows.drop_columns([BUCKET_COLUMN]).cast(table.schema().as_arrow())
    old_files = [task.file for task in table.scan().plan_files() if task.file.partition[0] in set(changed)]
    properties = {
        "logistics.source": f"duckdb marts.{ORDERS_MART}",
        "logistics.buckets-rewritten": ",".join(map(str, changed)),
    }
    with table.transaction() as tx:
        new_files = list(_dataframe_to_data_files(table_metadata=tx.table_metadata, df=rows, io=table.io))
        with tx.update_snapshot(snapshot_properties=properties).overwrite() as ow:
            for f in old_files:
                ow.delete_data_file(f)
            for f in new_files:
                ow.append_data_file(f)
        tx.set_properties({FINGERPRINT_PROPERTY: json.dumps({str(b): fp for b, fp in sorted(current.items())})})
    snap = catalog.load_table(identifier).current_snapshot()
    report.snapshot_id = snap.snapshot_id if snap else None
    report.seconds = time.perf_counter() - started
    return report


def publish_marts(
    catalog: Catalog,
    con: duckdb.DuckDBPyConnection,
    marts: Sequence[str] = MART_MODELS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, PublishReport]:
    """Publish every mart (one commit per table); returns mart -> report."""
    reports: dict[str, PublishReport] = {}
    for mart in marts:
        report = publish_orders(catalog, con) if mart == ORDERS_MART else publish_full(catalog, con, mart)
        reports[mart] = report
        if progress is not None:
            extra = (
                f", rewrote {len(report.buckets_rewritten)}/{report.buckets_total} buckets"
                if mart == ORDERS_MART
                else ""
            )
            progress(f"published marts.{mart}: {report.rows:,} rows in {report.seconds:.2f}s{extra}")
    return reports
