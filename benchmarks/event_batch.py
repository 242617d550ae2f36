"""Benchmark: one run whose step materializes many partitions, on the prod instance (PostgreSQL), with and without
``DAGSTER_EVENT_BATCH_SIZE``.

Starts ``dagster.prod.yaml`` against a fresh database of the local PostgreSQL (127.0.0.1:5432, user postgres), then
materializes two single-run-backfill assets over ``--hours`` hourly partitions (a planned event and a materialization
per asset and hour, nothing computed), alternating the variable unset and set to ``--batch``, after one warm-up run.

    .venv/bin/python benchmarks/event_batch.py                  # 360 hours, 2 assets: 720 materializations a run
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import psycopg2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from logistics_platform.lib.timekeys import hour_key
from tests.support.prod import PROD_YAML, dagster_pg_env

START = datetime(2026, 11, 1)
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=int, default=360)
    parser.add_argument("--batch", default="1000")
    args = parser.parse_args()

    hours = dg.HourlyPartitionsDefinition(start_date=hour_key(START), timezone="UTC")

    @dg.asset(partitions_def=hours, backfill_policy=dg.BackfillPolicy.single_run())
    def first() -> None:
        """Materializes every hour of its run's range, computing nothing."""

    @dg.asset(partitions_def=hours, backfill_policy=dg.BackfillPolicy.single_run())
    def second() -> None:
        """The same, a second asset of the run."""

    name = f"bench_batch_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", connect_timeout=5)
    admin.autocommit = True
    admin.cursor().execute(f'create database "{name}"')
    home = Path(tempfile.mkdtemp(prefix="bench_event_batch_"))
    shutil.copy(PROD_YAML, home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ.update(dagster_pg_env(f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}", "not-checked"))
    tags = {
        "dagster/asset_partition_range_start": hour_key(START),
        "dagster/asset_partition_range_end": hour_key(START + timedelta(hours=args.hours - 1)),
    }
    try:
        with dg.DagsterInstance.get() as instance:
            batched = (args.batch, args.batch)
            runs = [("warm-up", "0"), ("unset", "0"), batched, ("unset", "0"), batched]
            for label, size in runs:
                os.environ["DAGSTER_EVENT_BATCH_SIZE"] = size
                started = time.perf_counter()
                result = dg.materialize([first, second], instance=instance, tags=tags, run_config=QUIET)
                seconds = time.perf_counter() - started
                if not result.success:
                    raise SystemExit("the benchmark run failed")
                print(
                    f"DAGSTER_EVENT_BATCH_SIZE {label}: {2 * args.hours} materializations and as many planned events "
                    f"in one run: {seconds:.1f} s",
                    flush=True,
                )
    finally:
        admin.cursor().execute(f'drop database if exists "{name}" with (force)')
        admin.close()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
