"""Publish the DuckDB marts to the Iceberg namespace ``marts`` with write-audit-publish: changed day partitions are
written to the branch ``audit``, checked (:mod:`.audit`), and ``main`` fast-forwarded only when every mart passed.
Rationale and details: docs/internals/publish.md."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

import duckdb
import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFile, ManifestEntryStatus
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.snapshots import ancestors_of
from pyiceberg.table.update.snapshot import ManageSnapshots
from pyiceberg.transforms import DayTransform, VoidTransform

from logistics_platform.lib.iceberg_internals import arrow_to_data_files, transaction
from logistics_platform.lib.transform import audit
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.settings import Settings

NAMESPACE = "marts"
ORDERS_MART = "fct_orders"
# The column whose day partitions each mart (Iceberg `day` transform); a mart not listed is one partition.
PARTITION_COLUMNS = {
    "fct_orders": "created_at",
    "fct_deliveries": "delivered_at",
    "fct_daily_revenue": "revenue_date",
    "fct_hourly_region_orders": "window_start",
    "fct_courier_hourly_activity": "window_start",
    "fct_region_sla": "window_start",
    "fct_region_delivery_daily": "delivery_date",
    "fct_courier_gps_jumps": "recorded_at",
    "fct_courier_off_route": "started_at",
    "late_events": "arrival_hour",
}
FINGERPRINT_PROPERTY = "logistics.partition-fingerprints"
LEGACY_FINGERPRINT_PROPERTY = "logistics.bucket-fingerprints"  # of fct_orders by bucket(16, order_id), before days
WHOLE_TABLE = "all"  # the label of an unpartitioned mart's one partition

AUDIT_BRANCH = "audit"
AUDIT_PROPERTY = "logistics.audit"
AUDITED_SNAPSHOT_PROPERTY = "logistics.audited-snapshot-id"
AUDIT_FAILURES_PROPERTY = "logistics.audit-failures"
MAX_ROW_DROP: float = Settings.model_fields["publish_max_row_drop"].default
# The marts the revenue reconciliation reads, and the columns it needs of each.
REVENUE_INPUTS = {
    "fct_daily_revenue": ("revenue_date", "tenant_id", "orders_delivered", "gross_revenue", "courier_revenue",
                          "platform_revenue", "tenant_revenue"),
    "fct_deliveries": ("order_id", "tenant_id", "delivered_at"),
    ORDERS_MART: ("order_id", "total_amount"),
}  # fmt: skip
_FAST_FORWARD_ATTEMPTS = 5
_EPOCH = date(1970, 1, 1)

Partition = int | None  # days since 1970-01-01 of the partition column (None: null); 0 for an unpartitioned mart


@dataclass
class PublishReport:
    """What publishing one mart did: ``audit`` passed, unchanged, failed or held (passed, but another mart failed)."""

    table: str
    rows: int
    snapshot_id: int | None
    seconds: float  # write, audit and fast-forward
    audit_seconds: float = 0.0
    partitions_rewritten: list[str] = field(default_factory=list)
    partitions_total: int = 0
    audit: str = "passed"
    audit_failures: list[str] = field(default_factory=list)
    audited_snapshot_id: int | None = None


class AuditFailed(RuntimeError):
    """A mart's new snapshot failed its audit: no mart's main moved; ``reports`` has every mart's outcome."""

    def __init__(self, reports: dict[str, PublishReport]) -> None:
        self.reports = reports
        parts = []
        for r in reports.values():
            if r.audit == "failed":
                written = r.audited_snapshot_id is not None
                where = f"(branch {AUDIT_BRANCH}, snapshot {r.audited_snapshot_id})" if written else "(not written)"
                parts.append(f"marts.{r.table} {where}: {'; '.join(r.audit_failures)}")
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
    table: Table | None = None
    base_id: int | None = None
    main_rows: int = 0
    changed: list[Partition] = field(default_factory=list)
    changed_rows: int = 0  # the DuckDB mart's rows in the changed partitions
    rewritten: pa.Table | None = None  # the rewritten rows, read back by the audit
    on_publish: dict[str, str] = field(default_factory=dict)  # table properties set by the commit that moves main
    drop_properties: list[str] = field(default_factory=list)  # and the ones it removes


def partition_expression(column: str | None) -> str:
    """The DuckDB SQL of a row's :data:`Partition`: Iceberg's ``day`` transform of ``column`` (days since epoch)."""
    return f"datediff('day', date '1970-01-01', cast(\"{column}\" as date))" if column else "0"


def partition_label(partition: Partition, column: str | None) -> str:
    """A partition as people read it: its day, ``null``, or ``all`` for an unpartitioned mart."""
    if column is None:
        return WHOLE_TABLE
    return "null" if partition is None else (_EPOCH + timedelta(days=partition)).isoformat()


def in_partitions(column: str | None, partitions: Iterable[Partition]) -> str:
    """A DuckDB predicate true for the rows of ``partitions``."""
    parts = list(partitions)
    expression = partition_expression(column)
    terms = [f"{expression} is null"] if None in parts else []
    if values := sorted(p for p in parts if p is not None):
        terms.append(f"{expression} in ({', '.join(map(str, values))})")
    return " or ".join(terms) or "false"


def partition_fingerprints(con: duckdb.DuckDBPyConnection, mart: str, columns: Sequence[str]) -> dict[Partition, str]:
    """Partition -> 'count:xor-of-row-hashes' of the DuckDB mart (order-independent: equal data, equal fingerprint)."""
    hashed = ", ".join(f'"{c}"' for c in columns)
    result = con.sql(
        f"select {partition_expression(PARTITION_COLUMNS.get(mart))} as p, count(*), bit_xor(hash({hashed})) "
        f"from marts.{mart} group by p"
    ).fetchall()
    return {None if p is None else int(p): f"{n}:{h}" for p, n, h in result}


def _rows_of(fingerprint: str) -> int:
    return int(fingerprint.split(":", 1)[0])


def _published_fingerprints(table: Table, spec_id: int) -> dict[Partition, str] | None:
    """The fingerprints main's last publish stored for the current spec; None when there are none to trust."""
    stored = json.loads(table.properties.get(FINGERPRINT_PROPERTY, "{}"))
    if stored.get("spec-id") != spec_id:
        return None
    return {None if k == "null" else int(k): v for k, v in stored.get("partitions", {}).items()}


def _load_or_create(catalog: Catalog, identifier: str, schema: pa.Schema) -> Table:
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        return catalog.create_table(identifier, schema=schema)


def _ensure_spec(table: Table, column: str | None) -> Table:
    """Give ``table`` the spec ``day(column)`` (none without a column); files of an earlier spec stay readable."""
    have = [(f.source_id, str(f.transform)) for f in table.spec().fields if not isinstance(f.transform, VoidTransform)]
    wanted = [(table.schema().find_field(column).field_id, str(DayTransform()))] if column else []
    if have != wanted:
        with table.update_spec() as update:
            for old in table.spec().fields:
                update.remove_field(old.name)
            if column:
                update.add_field(column, DayTransform(), f"{column}_day")
    return table


def write_audit_snapshot(
    table: Table, rows: pa.Table, delete_files: Sequence[DataFile], properties: dict[str, str]
) -> int:
    """Commit ``rows`` (replacing ``delete_files`` of main's head) as the head of the audit branch; main stays."""
    base = table.metadata.current_snapshot_id
    if base is not None:
        table.manage_snapshots().create_branch(base, AUDIT_BRANCH).commit()
    branch = AUDIT_BRANCH if base is not None else None
    rows = rows.cast(table.schema().as_arrow())
    with transaction(table) as tx:
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
    with transaction(table) as tx:
        marker = tx.update_snapshot(snapshot_properties=properties, branch=AUDIT_BRANCH).fast_append()
        marker.commit()  # an empty append: a snapshot of no new file
    return marker.snapshot_id


def fast_forward_main(
    table: Table, base_id: int | None, properties: dict[str, str] | None = None, removals: Sequence[str] = ()
) -> int:
    """Point main at the audit branch's head (set ``properties``, drop ``removals``) in one commit; raises
    :class:`MainMoved` when main is no longer at ``base_id``."""
    name = ".".join(table.name())
    for attempt in range(_FAST_FORWARD_ATTEMPTS):
        table.refresh()
        current = table.metadata.current_snapshot_id
        if (head := table.metadata.snapshot_by_name(AUDIT_BRANCH)) is None:
            raise MainMoved(f"{name} has no branch {AUDIT_BRANCH} to publish: re-run the publish")
        lineage = {s.snapshot_id for s in ancestors_of(head, table.metadata)}
        if current != base_id or (base_id is not None and base_id not in lineage):
            raise MainMoved(
                f"main of {name} moved from snapshot {base_id} to {current} during the publish: re-run the publish"
            )
        tx = transaction(table)
        ManageSnapshots(tx).set_current_snapshot(ref_name=AUDIT_BRANCH)
        if properties:
            tx.set_properties(properties)
        if removals:
            tx.remove_properties(*removals)
        try:
            tx.commit_transaction()
            break
        except CommitFailedException:
            if attempt == _FAST_FORWARD_ATTEMPTS - 1:
                raise
    _drop_audit_branch(table)
    return head.snapshot_id


def _drop_audit_branch(table: Table) -> None:
    with contextlib.suppress(CommitFailedException):  # a leftover branch is harmless: the next publish replaces it
        table.manage_snapshots().remove_branch(AUDIT_BRANCH).commit()


def _stage(
    catalog: Catalog, con: duckdb.DuckDBPyConnection, mart: str, columns: Sequence[str], staged: _Staged
) -> None:
    """Write the changed partitions of ``mart`` to the audit branch; nothing when none changed."""
    column = PARTITION_COLUMNS.get(mart)
    schema = con.sql(f"select * from marts.{mart} limit 0").to_arrow_table().schema
    table = _ensure_spec(_load_or_create(catalog, f"{NAMESPACE}.{mart}", schema), column)
    staged.table, staged.base_id = table, table.metadata.current_snapshot_id
    snap = table.current_snapshot()
    staged.main_rows = int((snap.summary or {}).get("total-records", 0)) if snap else 0
    spec_id = table.metadata.default_spec_id
    current = partition_fingerprints(con, mart, columns)
    stored = _published_fingerprints(table, spec_id)  # None: none to trust, so a full rewrite
    published = stored or {}
    differ = {p for p in set(current) | set(published) if current.get(p) != published.get(p)}
    staged.changed = changed = sorted(differ, key=lambda p: (p is None, p or 0))
    live = [] if staged.base_id is None else [t.file for t in table.scan(snapshot_id=staged.base_id).plan_files()]
    stale = [f for f in live if stored is None or f.spec_id != spec_id or (f.partition[0] if column else 0) in differ]
    staged.report.rows = sum(_rows_of(fp) for fp in current.values())
    staged.changed_rows = sum(_rows_of(current[p]) for p in changed if p in current)
    staged.report.partitions_rewritten = [partition_label(p, column) for p in changed]
    staged.report.partitions_total = len(current)
    if not changed and not stale and staged.base_id is not None:
        staged.report.audit, staged.report.snapshot_id = "unchanged", staged.base_id
        return
    rows = con.sql(f"select * from marts.{mart} where {in_partitions(column, changed)}").to_arrow_table()
    properties = {
        "logistics.source": f"duckdb marts.{mart}",
        "logistics.partitions-rewritten": ",".join(staged.report.partitions_rewritten),
    }
    staged.report.audited_snapshot_id = write_audit_snapshot(table, rows, stale, properties)
    fingerprints = {"null" if p is None else str(p): fp for p, fp in current.items()}
    staged.on_publish = {FINGERPRINT_PROPERTY: json.dumps({"spec-id": spec_id, "partitions": fingerprints})}
    staged.drop_properties = [k for k in (LEGACY_FINGERPRINT_PROPERTY,) if k in table.properties]


def _audit(con: duckdb.DuckDBPyConnection, staged: _Staged, max_row_drop: float) -> None:
    """Run the per-mart checks on the branch snapshot: the files it added, its record count from the manifest list."""
    assert staged.table is not None and staged.report.audited_snapshot_id is not None
    table, snapshot_id = staged.table, staged.report.audited_snapshot_id
    snapshot, schema = table.snapshot_by_id(snapshot_id), table.scan(snapshot_id=snapshot_id).projection()
    assert snapshot is not None
    manifests = snapshot.manifests(table.io)
    contract = audit.load_contract(staged.mart)
    failures = audit.check_iceberg_contract(contract, schema)
    added = [
        FileScanTask(entry.data_file)
        for manifest in manifests
        if manifest.added_snapshot_id == snapshot_id
        for entry in manifest.fetch_manifest_entry(table.io)
        if entry.status == ManifestEntryStatus.ADDED
    ]
    rows = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table(added)
    if not failures:
        column = PARTITION_COLUMNS.get(staged.mart)
        failures += audit.check_keys(con, contract, rows)
        if column is not None and column not in contract.key:
            failures += audit.check_keys_in_one_partition(con, contract, rows, in_partitions(column, staged.changed))
    if rows.num_rows != staged.changed_rows:
        failures.append(
            f"row count: the rewritten partitions of {staged.mart} hold {rows.num_rows} rows in the audit snapshot, "
            f"{staged.changed_rows} in the DuckDB mart"
        )
    records = sum((m.added_rows_count or 0) + (m.existing_rows_count or 0) for m in manifests)
    failures += audit.check_row_count(staged.mart, records, staged.report.rows, staged.main_rows, max_row_drop)
    staged.report.audit_failures += failures
    staged.rewritten = rows if staged.mart in REVENUE_INPUTS else None


def _scan(catalog: Catalog, staged: dict[str, _Staged], mart: str, row_filter: str) -> pa.Table | None:
    """``mart``'s rows (its REVENUE_INPUTS columns) main will serve: this publish's audited snapshot, or main's."""
    stage = staged.get(mart)
    if stage is not None and stage.table is not None and stage.report.audited_snapshot_id is not None:
        table, snapshot_id = stage.table, stage.report.audited_snapshot_id
    else:
        try:
            table = catalog.load_table(f"{NAMESPACE}.{mart}")
        except NoSuchTableError:
            return None
        snapshot_id = table.metadata.current_snapshot_id
    return table.scan(snapshot_id=snapshot_id, row_filter=row_filter, selected_fields=REVENUE_INPUTS[mart]).to_arrow()


def _reconcile_revenue(catalog: Catalog, con: duckdb.DuckDBPyConnection, staged: dict[str, _Staged]) -> None:
    """Invariant 4a over what main will serve, on the delivery days this publish rewrote (of any of the three marts)."""
    written = {m: s for m, s in staged.items() if m in REVENUE_INPUTS and s.report.audited_snapshot_id is not None}
    if not written or any(s.report.audit_failures for s in written.values()):
        return
    by_day = [p for m in ("fct_daily_revenue", "fct_deliveries") if m in written for p in written[m].changed]
    days = {_EPOCH + timedelta(days=p) for p in by_day if p is not None}
    orders = written.get(ORDERS_MART)
    if orders is not None and orders.rewritten is not None:
        days |= {d.date() for d in orders.rewritten.column("delivered_at").drop_null().to_pylist()}
    if not days:
        return
    first, last = min(days), max(days)
    start, end = f"{first.isoformat()}T00:00:00", f"{(last + timedelta(days=1)).isoformat()}T00:00:00"
    revenue = _scan(catalog, staged, "fct_daily_revenue", f"revenue_date >= '{first}' and revenue_date <= '{last}'")
    deliveries = _scan(catalog, staged, "fct_deliveries", f"delivered_at >= '{start}' and delivered_at < '{end}'")
    if revenue is None or deliveries is None:
        return
    ids = deliveries.column("order_id").drop_null().to_pylist()
    order_filter = f"order_id >= {min(ids)} and order_id <= {max(ids)}" if ids else "true"
    if (order_rows := _scan(catalog, staged, ORDERS_MART, order_filter)) is None:
        return
    if failures := audit.check_revenue(con, revenue, deliveries, order_rows):
        target = written.get("fct_daily_revenue") or next(iter(written.values()))
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
        stage = staged[mart] = _Staged(mart, PublishReport(mart, 0, None, 0.0))
        described = [(str(r[0]), str(r[1])) for r in con.sql(f"describe marts.{mart}").fetchall()]
        if contract_failures := audit.check_duckdb_contract(audit.load_contract(mart), described):
            stage.report.audit, stage.report.audit_failures = "failed", contract_failures
            stage.report.rows = int((con.sql(f"select count(*) from marts.{mart}").fetchone() or (0,))[0])
            continue
        _stage(catalog, con, mart, [name for name, _ in described], stage)
        stage.report.seconds = time.perf_counter() - started

    for stage in staged.values():
        if stage.report.audit == "failed" or stage.report.audited_snapshot_id is None:
            continue
        started = time.perf_counter()
        _audit(con, stage, max_row_drop)
        if stage.report.audit_failures:
            stage.report.audit = "failed"
        stage.report.audit_seconds = time.perf_counter() - started
        stage.report.seconds += stage.report.audit_seconds
    _reconcile_revenue(catalog, con, staged)

    reports = {mart: stage.report for mart, stage in staged.items()}
    failed = any(r.audit == "failed" for r in reports.values())
    for stage in staged.values():
        report, table, audited = stage.report, stage.table, stage.report.audited_snapshot_id
        outcome = {AUDIT_PROPERTY: report.audit, AUDITED_SNAPSHOT_PROPERTY: str(audited)}
        if failed:
            if report.audit == "failed" and table is not None and audited is not None:
                mark_audit_branch(table, {**outcome, AUDIT_FAILURES_PROPERTY: " | ".join(report.audit_failures)})
            elif report.audit == "passed":
                report.audit = "held"
            reasons = f" ({'; '.join(report.audit_failures)})" if report.audit_failures else ""
            say(f"audit of marts.{stage.mart}: {report.audit}{reasons}")
            continue
        if report.audit == "passed" and table is not None and audited is not None:
            started = time.perf_counter()
            mark_audit_branch(table, outcome)
            report.snapshot_id = fast_forward_main(table, stage.base_id, stage.on_publish, stage.drop_properties)
            report.seconds += time.perf_counter() - started
        elif report.audit == "unchanged" and table is not None and AUDIT_BRANCH in table.metadata.refs:
            _drop_audit_branch(table)  # main already serves what DuckDB holds: a failed publish's branch is stale
        say(
            f"published marts.{stage.mart}: {report.rows:,} rows in {report.seconds:.2f}s, rewrote "
            f"{len(report.partitions_rewritten)}/{report.partitions_total} partitions (audit {report.audit})"
        )
    if failed:
        raise AuditFailed(reports)
    return reports
