"""The transform sensor on real runs: hours ingested while a dbt run is in flight go to the next dbt run.

Real bronze ingest runs, real dbt runs of the transform job and the sensor's own evaluations, on one Dagster
instance. The ingest happens once the dbt step has read its ingest watermark, i.e. after the point from which the
run may have read bronze without it: the sensor must ask for those hours again.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.definitions import build_definitions
from logistics_platform.defs.constants import INGEST_JOB, TRANSFORM_JOB
from logistics_platform.lib.connections import connect
from logistics_platform.lib.operate.transform_pending import WATERMARK_TAG
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.lib.transform.arrival_window import WINDOW_END_TAG, WINDOW_START_TAG
from logistics_platform.pipeline import QUIET
from logistics_platform.settings import local_settings
from tests.support.bronze import cdc, dump, order, write_file
from tests.support.transform_world import build_world, write_landing

pytestmark = pytest.mark.slow

LATE_ORDER = 990_001


def test_hours_ingested_while_a_dbt_run_is_in_flight_go_to_the_next_run(tmp_path: Path) -> None:
    settings = local_settings(tmp_path, partitions_start="2026-11-02-00:00")
    world = build_world(hours=3, orders_per_hour=6, seed=31)
    write_landing(world, settings.landing_dir)
    h0, h1, h2 = world.hours
    defs = build_definitions(settings)
    repo = defs.get_repository_def()
    sensor = repo.get_sensor_def("transform_after_ingest")
    cursor: list[str | None] = [None]

    with dg.instance_for_test() as instance:

        def tick() -> dg.RunRequest | dg.SkipReason:
            context = dg.build_sensor_context(instance=instance, repository_def=repo, cursor=cursor[0])
            result = sensor(context)
            cursor[0] = context.cursor
            return result

        def ingest(first: datetime, last: datetime) -> None:
            job = defs.resolve_job_def(INGEST_JOB)
            tags = {
                "dagster/asset_partition_range_start": hour_key(first),
                "dagster/asset_partition_range_end": hour_key(last),
            }
            assert job.execute_in_process(instance=instance, tags=tags, run_config=QUIET).success

        def transform(request: dg.RunRequest) -> dg.ExecuteInProcessResult:
            job = defs.resolve_job_def(TRANSFORM_JOB)
            return job.execute_in_process(instance=instance, tags=request.tags, run_config=QUIET)

        ingest(h0, h1)
        first = tick()
        assert isinstance(first, dg.RunRequest)
        assert (first.tags[WINDOW_START_TAG], first.tags[WINDOW_END_TAG]) == (hour_key(h0), hour_key(h1))

        # The dbt run starts; once its step has read the watermark, hour 02 lands and a delayed file lands in
        # hour 01, and both are ingested while dbt may be reading bronze.
        results: list[dg.ExecuteInProcessResult] = []
        running = threading.Thread(target=lambda: results.append(transform(first)))
        running.start()
        while not _watermarked(instance):
            assert running.is_alive(), "the transform run ended before its dbt step read the ingest watermark"
            time.sleep(0.2)
        late = cdc("c", "orders", order(LATE_ORDER, h1 + timedelta(minutes=30)), lsn=9_000_000, ts=h1)
        write_file(settings.landing_dir, "oltp.public.orders", h1, 0, 900_000, [dump(late)])
        ingest(h1, h2)
        running.join()
        assert results and results[0].success

        # The next tick asks for exactly the hours ingested since that run read its watermark.
        second = tick()
        assert isinstance(second, dg.RunRequest), second
        assert (second.tags[WINDOW_START_TAG], second.tags[WINDOW_END_TAG]) == (hour_key(h1), hour_key(h2))
        assert second.tags["logistics/pending_hours"] == "2"
        assert transform(second).success
        done = tick()
        assert isinstance(done, dg.SkipReason) and "every ingested hour is built" in (done.skip_message or "")

    con = connect(settings.duckdb_path, read_only=True)
    try:
        (found,) = con.execute("select count(*) from marts.fct_orders where order_id = ?", [LATE_ORDER]).fetchone()
    finally:
        con.close()
    assert found == 1


def _watermarked(instance: dg.DagsterInstance) -> bool:
    """Whether the transform run's dbt step has read its ingest watermark (it tags the run with it first)."""
    runs = instance.get_runs(dg.RunsFilter(job_name=TRANSFORM_JOB), limit=1)
    return bool(runs) and WATERMARK_TAG in runs[0].tags
