"""dagster.prod.yaml loaded by Dagster itself: PostgreSQL storage, the queued run coordinator with its limits, run
retries and run monitoring, and a real run whose records land in the PostgreSQL database."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
import psycopg2
import pytest
import yaml
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage
from sqlalchemy.engine import make_url

from logistics_platform.defs.constants import DUCKDB_POOL, DUCKDB_WRITER_TAGS, MAINTENANCE_WRITER_TAGS
from logistics_platform.pipeline import EVENT_BATCH_VARIABLE, batched_events
from logistics_platform.settings import local_settings
from tests.support.prod import PROD_YAML, prod_instance

pytestmark = pytest.mark.postgres


def _tables(pg_uri: str) -> dict[str, int]:
    """Row count of every table in the database of ``pg_uri``."""
    url = make_url(pg_uri)
    with psycopg2.connect(host=url.host, port=url.port, user=url.username, dbname=url.database) as conn:
        cur = conn.cursor()
        cur.execute("select tablename from pg_tables where schemaname = 'public'")
        names = [r[0] for r in cur.fetchall()]
        counts = {}
        for name in names:
            cur.execute(f'select count(*) from "{name}"')
            counts[name] = cur.fetchone()[0]
    return counts


def test_the_prod_instance_stores_runs_events_and_schedules_in_postgres(
    tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with prod_instance(tmp_path / "dagster_home", pg_database, monkeypatch) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)

        @dg.asset(pool=DUCKDB_POOL)
        def probe() -> dg.MaterializeResult:
            """A one-step asset whose run the instance records."""
            return dg.MaterializeResult(metadata={"rows": 3})

        result = dg.materialize([probe], instance=instance, tags=DUCKDB_WRITER_TAGS)
        assert result.success
        run = instance.get_run_by_id(result.run_id)
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
        event = instance.get_latest_materialization_event(dg.AssetKey("probe"))
        assert event is not None and event.asset_materialization is not None
        assert event.asset_materialization.metadata["rows"] == dg.IntMetadataValue(3)

    # Stored in the PostgreSQL database, not in files under DAGSTER_HOME.
    counts = _tables(pg_database)
    assert counts["runs"] == 1
    assert counts["event_logs"] > 0
    assert {"jobs", "job_ticks", "instigators"} <= set(counts)
    assert not list((tmp_path / "dagster_home").glob("**/*.db"))


def test_the_prod_instance_queues_runs_with_limits_retries_and_monitoring(
    tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = yaml.safe_load(PROD_YAML.read_text())
    with prod_instance(tmp_path / "dagster_home", pg_database, monkeypatch) as instance:
        assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
        # What the daemon dequeues by (the coordinator's own defaults are overridden by `concurrency.runs`).
        concurrency = instance.get_concurrency_config()
        queue = concurrency.run_queue_config
        assert queue is not None
        assert queue.max_concurrent_runs == declared["concurrency"]["runs"]["max_concurrent_runs"] == 8
        limits = {(t["key"], t["value"]): t["limit"] for t in queue.tag_concurrency_limits}
        # One run at a time per single writer: the DuckDB file and the maintenance jobs.
        assert limits == {
            (*next(iter(DUCKDB_WRITER_TAGS.items())),): 1,
            (*next(iter(MAINTENANCE_WRITER_TAGS.items())),): 1,
        }
        assert concurrency.pool_config.default_pool_limit == 1

        assert instance.run_retries_enabled
        assert instance.run_retries_max_retries == 2
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_start_timeout_seconds == 180
        # The daemon runs the queue, the retries and the monitoring for this instance.
        assert {"QUEUED_RUN_COORDINATOR", "MONITORING"} <= set(instance.get_required_daemon_types())


def test_run_batches_a_steps_events_on_the_prod_instance_only(
    tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(EVENT_BATCH_VARIABLE, raising=False)
    settings = local_settings(tmp_path, dagster_event_batch_size=100)
    hours = dg.HourlyPartitionsDefinition(start_date="2026-11-01-00:00", timezone="UTC")
    seen: list[str | None] = []

    @dg.asset(partitions_def=hours, backfill_policy=dg.BackfillPolicy.single_run())
    def hourly() -> None:
        """One step that materializes every hour of its range (as an ingest or dbt run of many partitions)."""
        seen.append(os.environ.get(EVENT_BATCH_VARIABLE))

    tags = {
        "dagster/asset_partition_range_start": "2026-11-01-00:00",
        "dagster/asset_partition_range_end": "2026-11-05-23:00",
    }
    with prod_instance(tmp_path / "dagster_home", pg_database, monkeypatch) as instance:
        with batched_events(instance, settings):
            assert dg.materialize([hourly], instance=instance, tags=tags).success
        # Written in batches, every hour's materialization is stored; the variable is restored afterwards.
        stored = instance.fetch_materializations(dg.AssetKey("hourly"), limit=1000).records
        assert len(stored) == 5 * 24 and os.environ.get(EVENT_BATCH_VARIABLE) is None
    with dg.instance_for_test() as sqlite, batched_events(sqlite, settings):
        assert dg.materialize([hourly], instance=sqlite, tags=tags).success
    assert seen == ["100", None]  # on SQLite nothing batches: left unset
