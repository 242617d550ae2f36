"""rebuild: builds aside, swaps the catalog pointers only after validation, and can roll back."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from logistics_platform.cli.rebuild import staged_models
from logistics_platform.defs.constants import MARTS
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.operate.rebuild import REBUILD_DIR, RebuildError, rebuild, rollback
from logistics_platform.settings import local_settings
from tests.support.bronze import HOUR, cdc, contract_hour, dump, order, write_file


def _locations(settings) -> dict[str, str]:
    catalog = load_catalog(settings)
    return {".".join(t): catalog.load_table(".".join(t)).metadata_location for t in catalog.list_tables("bronze")}


def test_failed_rebuild_changes_nothing_then_swap_and_rollback(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    contract_hour(settings.landing_dir, HOUR)
    ingest_hour(settings, HOUR)
    before = _locations(settings)
    live_rows = load_catalog(settings).load_table("bronze.orders").scan().count()
    # A second hour lands that the live tables never ingested: the rebuild will contain it.
    later = HOUR + timedelta(hours=1)
    line = dump(cdc("c", "orders", order(77, later), lsn=9000, ts=later))
    write_file(settings.landing_dir, "oltp.public.orders", later, 0, 40, [line])

    # A rebuild that cannot complete (here: the configured partitions start after every landed hour).
    with pytest.raises(RebuildError, match="nothing to rebuild"):
        rebuild(settings.with_overrides(partitions_start="2027-01-01-00:00"), (), staged_models, stamp="failed")
    assert _locations(settings) == before

    result = rebuild(settings, MARTS, staged_models, stamp="ok")
    assert result.partitions == ["2026-11-02-10:00", "2026-11-02-11:00"]
    after = _locations(settings)
    assert set(after) == set(before)
    assert all(f"/{REBUILD_DIR}/ok/" in loc for loc in after.values())
    assert load_catalog(settings).load_table("bronze.orders").scan().count() == live_rows + 1
    assert {t[1] for t in load_catalog(settings).list_tables("marts")} >= set(MARTS)
    con = connect(settings.duckdb_path, read_only=True)
    try:
        assert con.execute("select count(*) from marts.fct_orders where order_id = 77").fetchone()[0] == 1
    finally:
        con.close()

    rollback(settings, result.staging_root)
    assert _locations(settings) == before
    assert load_catalog(settings).load_table("bronze.orders").scan().count() == live_rows
