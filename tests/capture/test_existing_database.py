"""A platform started on a database that already has history: the first `capture` is an initial snapshot (`op: r`,
stamped with the snapshot's time, after the deliveries it covers), and `run` still builds and publishes the marts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg2
import pytest

from logistics_platform.cli import main
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.settings import Settings, local_settings
from tests.capture.support import fct_orders_equals_oltp

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SLOT = "cap_history"


def _tenant_versions_at_delivery(settings: Settings) -> tuple[int, int, int]:
    """(deliveries, deliveries with exactly one tenant version valid at delivered_at, snapshot-time deliveries)."""
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        row = duck.execute(
            """
            with matched as (
                select d.order_id, d.delivered_at, count(t.tenant_id) as versions
                from marts.fct_deliveries d
                left join marts.dim_tenant t
                    on t.tenant_id = d.tenant_id and d.delivered_at >= t.valid_from
                    and (t.valid_to is null or d.delivered_at < t.valid_to)
                group by all
            )
            select count(*), count(*) filter (where versions = 1),
                -- deliveries older than every tenant event the platform saw: the snapshot's own time
                count(*) filter (where delivered_at < (select min(_event_time) from staging.stg_tenants))
            from matched
            """
        ).fetchone()
    finally:
        duck.close()
    assert row is not None
    return row[0], row[1], row[2]


def test_existing_database_snapshot_then_run_publishes_marts_equal_to_oltp(
    oltp_dsn: str,
    tmp_path: Path,
    cli_env: Callable[[Settings], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`oltp-simulate --changes 3000` on a database with no slot, then `capture` (the initial snapshot), then `run`,
    through the CLI in real time: the transform's tests pass (invariant 4 included: tenants known only from the
    snapshot are valid from the start of history) and the published marts.fct_orders equals the OLTP table; the same
    after more changes and a second capture."""
    settings = local_settings(tmp_path, oltp_dsn=oltp_dsn, capture_slot=SLOT, capture_publication=SLOT)
    cli_env(settings)
    monkeypatch.setenv("CAPTURE_SLOT", SLOT)
    monkeypatch.setenv("CAPTURE_PUBLICATION", SLOT)

    def simulate_and_capture(changes: int, seed: int) -> str:
        monkeypatch.setenv("OLTP_DSN", oltp_dsn)
        assert main(["oltp-simulate", "--changes", str(changes), "--seed", str(seed)]) == 0
        assert main(["capture"]) == 0
        monkeypatch.delenv("OLTP_DSN")  # `run` of the landed files only, as a user's scheduled run of them
        return capsys.readouterr().out

    def run_and_compare() -> int:
        assert main(["run"]) == 0, capsys.readouterr().out
        rows = fct_orders_equals_oltp(settings, conn)
        published = load_catalog(settings).load_table(("marts", "fct_orders")).scan().to_arrow()
        assert len(published) == rows
        deliveries, with_version, _ = _tenant_versions_at_delivery(settings)
        assert deliveries > 0 and with_version == deliveries
        return rows

    conn = psycopg2.connect(oltp_dsn)
    # The whole history exists before the slot: every row reaches the platform as a snapshot read.
    assert "new slot, snapshot of" in simulate_and_capture(3000, 1)
    first = run_and_compare()
    # The case of the issue: deliveries older than the snapshot, which now find the tenant's first version.
    assert _tenant_versions_at_delivery(settings)[2] > 0

    assert "new slot" not in simulate_and_capture(500, 2)
    assert run_and_compare() > first
    conn.close()
