"""Writing rows to data files of a bronze table, batch by batch, without committing them (:mod:`.commit` does)."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io.pyarrow import pyarrow_to_schema, schema_to_pyarrow, write_file
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table, WriteTask

from logistics_platform.lib.iceberg_internals import arrow_to_data_files, split_by_partition


def conform(tbl: pa.Table, schema: pa.Schema) -> pa.Table:
    """``tbl`` with exactly ``schema``'s columns: columns added to the table since it was built read null, columns
    promoted since (rows parsed before, by another worker) are cast to their wider type."""
    if tbl.schema.equals(schema, check_metadata=True):
        return tbl
    n = tbl.num_rows
    names = set(tbl.column_names)
    arrays = [tbl.column(f.name).cast(f.type) if f.name in names else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def rows_to_arrow(rows: list[Any], schema: pa.Schema) -> pa.Table:
    """Row lists/tuples (table column order; extra trailing items ignored) -> an Arrow table of ``schema``."""
    columns = list(zip(*rows, strict=False)) if rows else [() for _ in schema]
    return pa.Table.from_arrays([pa.array(columns[i], type=f.type) for i, f in enumerate(schema)], schema=schema)


class BatchWriter:
    """Collects rows and Arrow tables and writes one Parquet data file per ``batch_rows`` rows (bounded memory)."""

    def __init__(self, table: Table, batch_rows: int) -> None:
        self.batch_rows = max(1, batch_rows)
        self.rows: list[Any] = []
        self.tables: list[pa.Table] = []
        self.pending = 0
        self.files: list[DataFile] = []
        self.write_uuid = uuid.uuid4()
        self.counter = itertools.count(0)
        self.reset(table)

    def reset(self, table: Table) -> None:
        """Use the table's current schema from now on (after a schema change; flush first)."""
        if self.pending:
            raise RuntimeError("flush before changing the schema")
        self.table = table
        self.arrow_schema = schema_to_pyarrow(table.schema(), include_field_ids=True)

    def add(self, row: Any) -> None:
        """Add one row (a tuple in table column order); writes a file when a batch is full."""
        self.rows.append(row)
        self.pending += 1
        if self.pending >= self.batch_rows:
            self.flush()

    def add_table(self, tbl: pa.Table | None) -> None:
        """Add Arrow rows (conformed to the table's schema); writes a file when a batch is full."""
        if tbl is None or tbl.num_rows == 0:
            return
        self.tables.append(conform(tbl, self.arrow_schema))
        self.pending += tbl.num_rows
        if self.pending >= self.batch_rows:
            self.flush()

    def flush(self) -> None:
        """Write the rows added since the last flush as data file(s)."""
        if not self.pending:
            return
        parts = self.tables
        if self.rows:
            parts.append(rows_to_arrow(self.rows, self.arrow_schema))
        self.rows, self.tables, self.pending = [], [], 0
        batch = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
        del parts
        self.files.extend(write_data_files(self.table, batch, self.write_uuid, self.counter))


def write_data_files(
    table: Table, batch: pa.Table, write_uuid: uuid.UUID, counter: itertools.count[int]
) -> list[DataFile]:
    """Write ``batch`` as Parquet data file(s) of ``table`` without committing them (one partition: one file,
    without pyiceberg's grouping and filtering of the whole batch)."""
    md = table.metadata
    spec, schema = md.spec(), md.schema()

    def constant(name: str | None) -> bool:
        column = batch.column(name) if name is not None else None
        return column is not None and not column.null_count and len(set(pc.min_max(column).values())) == 1

    single = not spec.is_unpartitioned() and batch.num_rows > 0
    if not single or not all(constant(schema.find_column_name(pf.source_id)) for pf in spec.fields):
        return arrow_to_data_files(md, table.io, batch, write_uuid=write_uuid, counter=counter)
    ((partition_key, _),) = split_by_partition(spec, schema, batch.slice(0, 1))
    task_schema = pyarrow_to_schema(batch.schema, name_mapping=schema.name_mapping, format_version=md.format_version)
    task = WriteTask(
        write_uuid=write_uuid,
        task_id=next(counter),
        schema=task_schema,
        record_batches=batch.to_batches(),
        partition_key=partition_key,
    )
    return list(write_file(table.io, md, iter([task])))
