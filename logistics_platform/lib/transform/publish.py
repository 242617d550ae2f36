"""Publish the DuckDB marts to the Iceberg namespace ``marts`` with write-audit-publish.

Write: each mart's new snapshot is committed to the branch ``audit`` of its table (created at ``main``'s head, or
replacing the branch a failed publish left). ``main`` does not move, so no reader of ``main`` sees it.
Audit: the blocking checks of :mod:`logistics_platform.lib.transform.audit` read that snapshot back (contract columns
and types, keys unique, row count equal to the DuckDB mart's and no drop beyond the bound, revenue reconciling across
the marts to publish).
Publish: only when every mart passed, each branch gets an empty snapshot carrying ``logistics.audit = passed`` and
``main`` is fast-forwarded to it (one metadata commit that also asserts ``main`` did not move meanwhile); the branch is
then dropped. A failed audit moves no ``main``: the failing branches get an empty snapshot carrying
``logistics.audit = failed`` and the reasons, stay for inspection, and :class:`AuditFailed` is raised.

``marts.fct_orders`` is partitioned by ``bucket(order_id)`` and only the buckets whose rows changed are rewritten: a
per-bucket fingerprint (row count + XOR of row hashes, computed in DuckDB) is stored in a table property by the commit
that moves ``main``, and the next publish replaces the data files of exactly the buckets whose fingerprint differs.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.table.update.snapshot import ManageSnapshots
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType

from logistics_platform.lib.iceberg_internals import arrow_to_data_files
from logistics_platform.lib.transform.audit import (
    check_duckdb_contract,
    check_iceberg_contract,
    check_keys,
    check_revenue,
    check_row_count,
    load_contract,
)
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.settings import Settings

NAMESPACE = "marts"
ORDERS_MART = "fct_orders"
ORDER_BUCKETS = 16
FINGERPRINT_PROPERTY = "logistics.bucket-fingerprints"
BUCKET_COLUMN = "_bucket"

AUDIT_BRANCH = "audit"
AUDIT_PROPERTY = "logistics.audit"
AUDITED_SNAPSHOT_PROPERTY = "logistics.audited-snapshot-id"
AUDIT_FAILURES_PROPERTY = "logistics.audit-failures"
# A publish may shrink a mart on main by at most this share (see audit.check_row_count for the exemptions).
MAX_ROW_DROP: float = Settings.model_fields["publish_max_row_drop"].default
# The marts the revenue reconciliation reads, and the columns it needs of each.
REVENUE_INPUTS = {
    "fct_daily_revenue": ("revenue_date", "tenant_id", "orders_delivered", "gross_revenue", "courier_revenue",
                          "platform_revenue", "tenant_revenue"),
    "fct_deliveries": ("order_id", "tenant_id", "delivered_at"),
    ORDERS_MART: ("order_id", "total_amount"),
}  # fmt: skip
_FAST_FORWARD_ATTEMPTS = 5


@dataclass
class PublishReport:
    """What publishing one mart did, and its audit's outcome.

    ``audit``: ``passed`` (main now points at ``snapshot_id``), ``unchanged`` (nothing to write, main as it was),
    ``failed`` (main untouched; ``audit_failures`` says why, the branch holds ``audited_snapshot_id`` unless the
    mart could not be written), or ``held`` (passed, but another mart failed, so main was not moved either).
    """

    table: str
    rows: int
    snapshot_id: int | None
    seconds: float
    buckets_rewritten: list[int] = field(default_factory=list)
    buckets_total: int = 0
    audit: str = "passed"
    audit_failures: list[str] = field(default_factory=list)
    audited_snapshot_id: int | None = None
    branch: str = AUDIT_BRANCH


class AuditFailed(RuntimeError):
    """A mart's new snapshot failed its audit: no mart's main moved; ``reports`` has every mart's outcome."""

    def __init__(self, reports: dict[str, PublishReport]) -> None:
        self.reports = reports
        failed = [r for r in reports.values() if r.audit == "failed"]
        parts = [
            f"marts.{r.table} "
            + (
                f"(branch {r.branch}, snapshot {r.audited_snapshot_id})"
                if r.audited_snapshot_id is not None
                else "(not written)"
            )
            + ": "
            + "; ".join(r.audit_failures)
            for r in failed
        ]
        super().__init__(
            f"Publish audit failed, main of every mart left unchanged: {' | '.join(parts)}. Inspect the branch "
            f"snapshot, fix the dbt models or data, then re-run the publish"
        )


class MainMoved(RuntimeError):
    """Another writer moved a mart's main while it was audited: the audited snapshot is no fast-forward of it."""


@dataclass
class _Staged:
    """A mart between write and publish."""

    mart: str
    report: PublishReport
    built_rows: int
    table: Table | None = None
    base_id: int | None = None
    main_rows: int = 0
    on_publish: dict[str, str] = field(default_factory=dict)  # table properties set by the commit that moves main


def _read_mart(con: duckdb.DuckDBPyConnection, mart: str) -> pa.Table:
    return con.sql(f"select * from marts.{mart}").to_arrow_table()


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


def _main_rows(table: Table) -> int:
    snap = table.current_snapshot()
    return int(snap.summary["total-records"]) if snap and snap.summary and "total-records" in snap.summary else 0


def _live_files(table: Table, snapshot_id: int | None) -> list[DataFile]:
    return [] if snapshot_id is None else [task.file for task in table.scan(snapshot_id=snapshot_id).plan_files()]


def write_audit_snapshot(
    table: Table, rows: pa.Table, delete_files: Sequence[DataFile], properties: dict[str, str]
) -> int:
    """Commit ``rows`` (replacing ``delete_files`` of main's head) as the head of the audit branch; main stays."""
    base = table.metadata.current_snapshot_id
    if base is not None:
        # Replaces the branch a failed publish left: every publish audits a fresh child of main's head.
        table.manage_snapshots().create_branch(base, AUDIT_BRANCH).commit()
    # pyiceberg refuses a branch commit on a table without snapshots; there the snapshot is committed unreferenced
    # (branch None) and the branch created at it.
    branch = AUDIT_BRANCH if base is not None else None
    rows = rows.cast(table.schema().as_arrow())
    with table.transaction() as tx:
        new_files = arrow_to_data_files(tx.table_metadata, table.io, rows) if rows.num_rows else []
        with tx.update_snapshot(snapshot_properties=properties, branch=branch).overwrite() as overwrite:
            for old in delete_files:
                overwrite.delete_data_file(old)
            for new in new_files:
                overwrite.append_data_file(new)
    if branch is None:
        table.manage_snapshots().create_branch(overwrite.snapshot_id, AUDIT_BRANCH).commit()
    return overwrite.snapshot_id


def mark_audit_branch(table: Table, properties: dict[str, str]) -> int:
    """Commit an empty snapshot on the audit branch that carries the audit's outcome in its summary."""
    with (
        table.transaction() as tx,
        tx.update_snapshot(snapshot_properties=properties, branch=AUDIT_BRANCH).fast_append() as marker,
    ):
        pass
    return marker.snapshot_id


def fast_forward_main(table: Table, base_id: int | None, properties: dict[str, str] | None = None) -> int:
    """Point main at the audit branch's head (and set ``properties``) if main is still at ``base_id``; drop the branch.

    One metadata commit that asserts main's snapshot: a concurrent commit on main makes it fail instead of
    discarding that commit. Raises :class:`MainMoved` when main is no longer ``base_id``.
    """
    name = ".".join(table.name())
    for attempt in range(_FAST_FORWARD_ATTEMPTS):
        table.refresh()
        current = table.metadata.current_snapshot_id
        head = table.metadata.snapshot_by_name(AUDIT_BRANCH)
        if head is None:
            raise MainMoved(f"{name} has no branch {AUDIT_BRANCH} to publish: re-run the publish")
        lineage = {s.snapshot_id for s in ancestors_of(head, table.metadata)}
        if current != base_id or (base_id is not None and base_id not in lineage):
            raise MainMoved(
                f"main of {name} moved from snapshot {base_id} to {current} during the publish: re-run the publish"
            )
        tx = table.transaction()
        ManageSnapshots(tx).set_current_snapshot(ref_name=AUDIT_BRANCH)
        if properties:
            tx.set_properties(properties)
        try:
            tx.commit_transaction()
            break
        except CommitFailedException:
            # Another commit (a tag, a property) landed first: check main again and retry on fresh metadata.
            if attempt == _FAST_FORWARD_ATTEMPTS - 1:
                raise
    with contextlib.suppress(CommitFailedException):  # a leftover branch is harmless: the next publish replaces it
        table.manage_snapshots().remove_branch(AUDIT_BRANCH).commit()
    return head.snapshot_id


def order_buckets(order_ids: pa.Array | pa.ChunkedArray, buckets: int = ORDER_BUCKETS) -> pa.Array:
    """Iceberg bucket numbers of order ids (the same murmur3 bucketing the table's partition spec uses)."""
    if isinstance(order_ids, pa.ChunkedArray):
        # An empty mart comes back as a ChunkedArray without chunks, which the transform cannot take.
        order_ids = order_ids.combine_chunks()
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


def _stage_full(catalog: Catalog, mart: str, data: pa.Table, staged: _Staged) -> None:
    """Write the whole mart to the audit branch (an overwrite of every file main's head has)."""
    table = _load_or_create(catalog, f"{NAMESPACE}.{mart}", data.schema)
    staged.table, staged.base_id, staged.main_rows = table, table.metadata.current_snapshot_id, _main_rows(table)
    properties = {"logistics.source": f"duckdb marts.{mart}"}
    staged.report.audited_snapshot_id = write_audit_snapshot(
        table, data, _live_files(table, staged.base_id), properties
    )


def _stage_orders(catalog: Catalog, con: duckdb.DuckDBPyConnection, data: pa.Table, staged: _Staged) -> None:
    """Write the changed buckets of fct_orders to the audit branch; nothing when no bucket changed."""
    table = _load_or_create(catalog, f"{NAMESPACE}.{ORDERS_MART}", data.schema, bucket_column="order_id")
    staged.table, staged.base_id, staged.main_rows = table, table.metadata.current_snapshot_id, _main_rows(table)
    with_bucket = data.append_column(BUCKET_COLUMN, order_buckets(data.column("order_id")))
    current = bucket_fingerprints(con, with_bucket)
    published: dict[str, str] = json.loads(table.properties.get(FINGERPRINT_PROPERTY, "{}"))
    changed = sorted(b for b in set(current) | {int(k) for k in published} if current.get(b) != published.get(str(b)))
    staged.report.buckets_rewritten, staged.report.buckets_total = changed, ORDER_BUCKETS
    if not changed and staged.base_id is not None:
        staged.report.audit = "unchanged"
        staged.report.snapshot_id = staged.base_id
        return
    changed_set = pa.array(changed, type=pa.int32())
    rows = with_bucket.filter(pc.is_in(with_bucket.column(BUCKET_COLUMN), value_set=changed_set))
    old_files = [f for f in _live_files(table, staged.base_id) if f.partition[0] in set(changed)]
    properties = {
        "logistics.source": f"duckdb marts.{ORDERS_MART}",
        "logistics.buckets-rewritten": ",".join(map(str, changed)),
    }
    staged.report.audited_snapshot_id = write_audit_snapshot(
        table, rows.drop_columns([BUCKET_COLUMN]), old_files, properties
    )
    staged.on_publish = {FINGERPRINT_PROPERTY: json.dumps({str(b): fp for b, fp in sorted(current.items())})}


def _audit(
    con: duckdb.DuckDBPyConnection, staged: _Staged, max_row_drop: float, keep: tuple[str, ...] | None
) -> pa.Table | None:
    """Run the per-mart checks on the branch snapshot; returns its ``keep`` columns for the revenue check."""
    assert staged.table is not None and staged.report.audited_snapshot_id is not None
    table, snapshot_id = staged.table, staged.report.audited_snapshot_id
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    schema = table.metadata.schema_by_id(snapshot.schema_id) if snapshot and snapshot.schema_id is not None else None
    contract = load_contract(staged.mart)
    failures = check_iceberg_contract(contract, schema if schema is not None else table.schema())
    rows = table.scan(snapshot_id=snapshot_id).to_arrow()
    if not failures:
        failures += check_keys(con, contract, rows)
    failures += check_row_count(staged.mart, rows.num_rows, staged.built_rows, staged.main_rows, max_row_drop)
    staged.report.audit_failures += failures
    return rows.select(list(keep)) if keep and not failures else None


def _main_rows_of(catalog: Catalog, mart: str, columns: tuple[str, ...]) -> pa.Table | None:
    try:
        table = catalog.load_table(f"{NAMESPACE}.{mart}")
    except NoSuchTableError:
        return None
    return table.scan(selected_fields=columns).to_arrow()


def _reconcile_revenue(
    catalog: Catalog,
    con: duckdb.DuckDBPyConnection,
    staged: dict[str, _Staged],
    audited: dict[str, pa.Table | None],
) -> None:
    """Invariant 4a over what main will serve: the audited snapshots of this publish, main's for the other marts."""
    written = [s for m, s in staged.items() if m in REVENUE_INPUTS and s.report.audited_snapshot_id is not None]
    if not written:
        return
    inputs = [
        audited[m] if m in audited else _main_rows_of(catalog, m, columns) for m, columns in REVENUE_INPUTS.items()
    ]
    revenue, deliveries, orders = inputs
    # A mart that failed its own checks (or a table that does not exist yet) leaves nothing to reconcile.
    if revenue is None or deliveries is None or orders is None:
        return
    failures = check_revenue(con, revenue, deliveries, orders)
    if failures:
        target = staged.get("fct_daily_revenue") or written[0]
        target.report.audit = "failed"
        target.report.audit_failures += failures


def publish_marts(
    catalog: Catalog,
    con: duckdb.DuckDBPyConnection,
    marts: Sequence[str] = MART_MODELS,
    progress: Callable[[str], None] | None = None,
    max_row_drop: float = MAX_ROW_DROP,
) -> dict[str, PublishReport]:
    """Write-audit-publish every mart; returns mart -> report, or raises :class:`AuditFailed` (no main moved)."""
    say = progress or (lambda _: None)
    staged: dict[str, _Staged] = {}
    for mart in marts:
        started = time.perf_counter()
        data = _read_mart(con, mart)
        stage = _Staged(mart, PublishReport(mart, data.num_rows, None, 0.0), data.num_rows)
        staged[mart] = stage
        described = [(str(r[0]), str(r[1])) for r in con.sql(f"describe marts.{mart}").fetchall()]
        contract_failures = check_duckdb_contract(load_contract(mart), described)
        if contract_failures:
            # Not written: a type the contract does not allow would change or break the Iceberg table's schema.
            stage.report.audit, stage.report.audit_failures = "failed", contract_failures
            continue
        if mart == ORDERS_MART:
            _stage_orders(catalog, con, data, stage)
        else:
            _stage_full(catalog, mart, data, stage)
        stage.report.seconds = time.perf_counter() - started

    # Audit every written snapshot, then the revenue reconciliation over the snapshots about to be published.
    revenue_rows: dict[str, pa.Table | None] = {}
    for mart, stage in staged.items():
        if stage.report.audit == "failed" or stage.report.audited_snapshot_id is None:
            continue
        started = time.perf_counter()
        revenue_rows[mart] = _audit(con, stage, max_row_drop, REVENUE_INPUTS.get(mart))
        if stage.report.audit_failures:
            stage.report.audit = "failed"
        stage.report.seconds += time.perf_counter() - started
    _reconcile_revenue(catalog, con, staged, revenue_rows)

    reports = {mart: stage.report for mart, stage in staged.items()}
    if any(r.audit == "failed" for r in reports.values()):
        for stage in staged.values():
            report = stage.report
            if report.audit == "failed" and stage.table is not None and report.audited_snapshot_id is not None:
                mark_audit_branch(
                    stage.table,
                    {
                        AUDIT_PROPERTY: "failed",
                        AUDITED_SNAPSHOT_PROPERTY: str(report.audited_snapshot_id),
                        AUDIT_FAILURES_PROPERTY: " | ".join(report.audit_failures),
                    },
                )
            elif report.audit == "passed":
                report.audit = "held"
            say(
                f"audit of marts.{stage.mart}: {report.audit}"
                + (f" ({'; '.join(report.audit_failures)})" if report.audit_failures else "")
            )
        raise AuditFailed(reports)

    for stage in staged.values():
        report = stage.report
        if report.audit == "passed" and stage.table is not None and report.audited_snapshot_id is not None:
            started = time.perf_counter()
            mark_audit_branch(
                stage.table, {AUDIT_PROPERTY: "passed", AUDITED_SNAPSHOT_PROPERTY: str(report.audited_snapshot_id)}
            )
            report.snapshot_id = fast_forward_main(stage.table, stage.base_id, stage.on_publish)
            report.seconds += time.perf_counter() - started
        extra = (
            f", rewrote {len(report.buckets_rewritten)}/{report.buckets_total} buckets"
            if stage.mart == ORDERS_MART
            else ""
        )
        say(
            f"published marts.{stage.mart}: {report.rows:,} rows in {report.seconds:.2f}s{extra} (audit {report.audit})"
        )
    return reports
