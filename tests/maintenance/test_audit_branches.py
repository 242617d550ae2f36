"""Nightly maintenance and write-audit-publish: a failed audit's branch stays readable through every maintenance step
(compaction, manifests, expiry, orphan sweep), and a later publish still fast-forwards main."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from logistics_platform.lib import connections as duck
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.maintenance import MaintenanceOptions, maintain_table
from logistics_platform.lib.maintenance.files import find_orphans, list_files, pyarrow_io, referenced_files
from logistics_platform.lib.transform.publish import (
    AUDIT_BRANCH,
    AUDIT_PROPERTY,
    AUDITED_SNAPSHOT_PROPERTY,
    AuditFailed,
    publish_marts,
)
from logistics_platform.settings import local_settings
from tests.support.marts import build_marts


def test_maintenance_keeps_a_failed_audit_branch_readable(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    catalog = load_catalog(settings)
    con = duck.connect(settings.duckdb_path)
    try:
        build_marts(con)
        publish_marts(catalog, con)
        for courier in (10, 11):  # two publishes: main has history for expiry to remove
            con.execute(f"insert into marts.dim_courier values ({courier}, 'Courier {courier}', 'r-a', 'bike', true)")
            publish_marts(catalog, con, marts=["dim_courier"])
        con.execute("insert into marts.dim_courier select * from marts.dim_courier where courier_id = 1")
        with pytest.raises(AuditFailed):
            publish_marts(catalog, con, marts=["dim_courier"])
    finally:
        con.close()

    table = catalog.load_table("marts.dim_courier")
    branch_head = table.metadata.refs[AUDIT_BRANCH].snapshot_id
    assert table.scan().use_ref(AUDIT_BRANCH).to_arrow().num_rows == 8
    assert table.scan().to_arrow().num_rows == 7

    # Everything old enough to go, with the smallest retention: only refs and main's head protect snapshots.
    options = MaintenanceOptions(
        small_file_bytes=1 << 20,
        target_file_bytes=1 << 20,
        snapshot_retention=timedelta(0),
        min_snapshots_to_keep=1,
        orphan_safety_window=timedelta(0),
        max_manifests_per_snapshot=1,
        now=datetime.now(UTC) + timedelta(days=30),
    )
    report = maintain_table(table, options)
    assert report.expiry is not None and report.expiry.snapshots_expired  # expiry did remove history

    table = catalog.load_table("marts.dim_courier")
    assert table.metadata.refs[AUDIT_BRANCH].snapshot_id == branch_head
    head = table.metadata.snapshot_by_id(branch_head)
    assert head is not None and head.summary is not None
    # The audited snapshot itself (the branch head's parent) was expired: the head's manifests keep its files.
    assert int(head.summary[AUDITED_SNAPSHOT_PROPERTY]) in report.expiry.snapshots_expired
    # Every file the branch (and main) reads still exists, and the orphan sweep finds nothing it may delete.
    io = pyarrow_io(table)
    present = {f.path for f in list_files(io, table.location())}
    assert referenced_files(table).content_files <= present
    assert find_orphans(table, safety_window=timedelta(0), now=datetime.now(UTC) + timedelta(days=30)).orphans == []
    branch_rows = table.scan().use_ref(AUDIT_BRANCH).to_arrow()
    assert branch_rows.num_rows == 8 and branch_rows.column("courier_id").to_pylist().count(1) == 2
    assert table.scan().to_arrow().num_rows == 7
    reader = duck.connect()
    try:
        location = table.metadata_location
        assert reader.sql(
            f"select count(*) from iceberg_scan('{location}', snapshot_from_id => {branch_head})"
        ).fetchone() == (8,)
        assert reader.sql(f"select count(*) from iceberg_scan('{location}')").fetchone() == (7,)
    finally:
        reader.close()
    # The next publish (duplicate fixed) replaces the branch and fast-forwards main past maintenance's commits.
    con = duck.connect(settings.duckdb_path)
    try:
        con.execute("delete from marts.dim_courier where rowid = (select max(rowid) from marts.dim_courier)")
        con.execute("update marts.dim_courier set name = 'Courier 1 renamed' where courier_id = 1")
        assert publish_marts(catalog, con, marts=["dim_courier"])["dim_courier"].audit == "passed"
    finally:
        con.close()
    table = catalog.load_table("marts.dim_courier")
    snap = table.current_snapshot()
    assert snap is not None and snap.summary is not None and snap.summary[AUDIT_PROPERTY] == "passed"
    assert AUDIT_BRANCH not in table.metadata.refs and table.scan().to_arrow().num_rows == 7
