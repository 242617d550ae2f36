"""The same dbt project on Spark: dbt's `spark` target (dbt-spark in .venv-spark, Iceberg's JdbcCatalog) builds every
mart from the same bronze tables into the `marts` namespace of the catalog, with the arrival hours processed out of
order and re-run, and `dbt test` passes there; every mart equals the one DuckDB builds from the same landing data
(columns, types, and rows as multisets both ways), read back from the catalog with pyiceberg.

Spark pays a JVM start and a few seconds per model on every invocation: the schedule is three dbt invocations.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.transform.project import MART_MODELS, run_dbt, window_vars
from logistics_platform.lib.transform.spark import spark_work_dir
from logistics_platform.settings import DBT_PROJECT_DIR, PROJECT_ROOT, local_settings
from tests.support.mart_equality import compare_marts
from tests.support.transform_world import build_world, write_landing

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="no JDK: `java` is not on PATH, and Spark runs on Java 17"),
]

SPARK_ENV_SCRIPT = PROJECT_ROOT / "scripts" / "spark_env.sh"
NO_TESTS = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]


def test_spark_builds_every_mart_equal_to_duckdb_with_hours_shuffled_and_rerun(tmp_path: Path) -> None:
    built = subprocess.run(["bash", str(SPARK_ENV_SCRIPT)], check=False)
    assert built.returncode == 0, "scripts/spark_env.sh failed: its output is in the captured stdout/stderr"
    world = build_world(hours=4, orders_per_hour=8, seed=29)
    duck = local_settings(tmp_path / "duckdb")
    write_landing(world, duck.landing_dir)
    spark = local_settings(tmp_path / "spark", landing_dir=duck.landing_dir).with_overrides(dbt_target="spark")
    hours = world.hours

    # DuckDB: every hour ingested, one full build with every test.
    for hour in hours:
        ingest_hour(duck, hour)
    result = run_dbt(duck, ["build", "--full-refresh"], target_path=tmp_path / "target-duckdb")
    assert result.ok

    # Spark: the last hour first (the tables do not exist: a full build), then the earlier hours as one range, then
    # the last hour re-run, with every data test and unit test of the project.
    target = tmp_path / "target-spark"
    ingest_hour(spark, hours[3])
    run_dbt(spark, ["build", *NO_TESTS], window=window_vars(hours[3]), target_path=target)
    for hour in hours[:3]:
        ingest_hour(spark, hour)
    run_dbt(spark, ["build", *NO_TESTS], window=window_vars(hours[0], hours[2]), target_path=target)
    result = run_dbt(spark, ["build"], window=window_vars(hours[3]), target_path=target)
    tests_run = [r for r in result.results if r["unique_id"].startswith(("test.", "unit_test."))]
    failed = [r["unique_id"] for r in tests_run if r["status"] in ("fail", "error")]
    assert result.ok and len(tests_run) > 50 and not failed, failed

    counts = compare_marts(spark, duck.duckdb_path)
    assert set(counts) == set(MART_MODELS)
    exercised = [m for m in MART_MODELS if counts[m] > 0]
    assert len(exercised) >= 8, counts
    # Spark's Derby metastore and log went to its work directory, not to the dbt project or the repository.
    assert (spark_work_dir(spark) / "derby.log").exists()
    for leftover in ("metastore_db", "derby.log"):
        assert not (DBT_PROJECT_DIR / leftover).exists() and not (PROJECT_ROOT / leftover).exists()
