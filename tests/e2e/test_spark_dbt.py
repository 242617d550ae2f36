"""The same dbt project on Spark: dbt's `spark` target (dbt-spark in .venv-spark, Iceberg's JdbcCatalog) builds every
mart from the same bronze tables into the `marts` namespace of the catalog, with the arrival hours processed out of
order and re-run, and every test of the project passes there; every mart equals the one DuckDB builds from the same
landing data (columns, types, and rows as multisets both ways), read back from the catalog with pyiceberg and with
DuckDB's iceberg_scan. The Dagster pipeline runs one of the windows (ingest and the dbt assets, on the Spark venv's
dbt), and the audit gate holds: the marts are written on an Iceberg branch, main moves only when the invocation's
tests pass, and a failing test leaves main, and what readers see, where it was.

Spark pays a JVM start and a few seconds per model on every invocation: the schedule is three dbt invocations.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from logistics_platform.cli.render import render_summary
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS, run_dbt, window_vars
from logistics_platform.lib.transform.spark import AUDIT_BRANCH, spark_work_dir
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import DBT_PROJECT_DIR, PROJECT_ROOT, Settings, local_settings
from tests.support.mart_equality import compare_marts
from tests.support.transform_world import build_world, write_landing

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("java") is None, reason="no JDK: `java` is not on PATH, and Spark runs on Java 17"),
]

SPARK_ENV_SCRIPT = PROJECT_ROOT / "scripts" / "spark_env.sh"
NO_TESTS = ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]
# Warning-severity tests of the project that the transform world trips (a mismatched payment; active orders made
# before the orders table had coordinates): with --warn-error they fail, real checks failing on real data.
WARNING_TESTS = {"assert_payments_reconcile", "assert_active_orders_have_coordinates"}
WAP_PROPERTY = "write.wap.enabled"
LEGACY_MART = "dim_tenant"


def refs(settings: Settings) -> dict[str, dict[str, int]]:
    """Mart -> branch name -> head snapshot id, as pyiceberg reads the catalog."""
    catalog = load_catalog(settings)
    out = {}
    for mart in MART_MODELS:
        table = catalog.load_table(("marts", mart))
        out[mart] = {name: ref.snapshot_id for name, ref in table.metadata.refs.items()}
    return out


def test_spark_builds_every_mart_equal_to_duckdb_with_hours_shuffled_and_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = subprocess.run(["bash", str(SPARK_ENV_SCRIPT)], check=False)
    assert built.returncode == 0, "scripts/spark_env.sh failed: its output is in the captured stdout/stderr"
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the pipeline's runs in an ephemeral Dagster instance
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

    # Spark, 1: the last hour first (the tables do not exist: a full build), models only. The marts are created on
    # the audit branch; no test ran, so main was never set: readers see empty marts, not unaudited rows.
    target = tmp_path / "target-spark"
    ingest_hour(spark, hours[3])
    run_dbt(spark, ["build", *NO_TESTS], window=window_vars(hours[3]), target_path=target)
    first = refs(spark)
    assert all(set(heads) == {AUDIT_BRANCH} for heads in first.values()), first
    # One mart made to look like a table built before the gate existed (no property): the next run's start puts it
    # back behind the gate.
    with load_catalog(spark).load_table(("marts", LEGACY_MART)).transaction() as transaction:
        transaction.remove_properties(WAP_PROPERTY)

    # Spark, 2: the earlier hours through the Dagster pipeline (the ingest job, then the transform job's dbt assets
    # on the Spark venv's dbt, data tests included): they pass, so the gate moves every mart's main to its branch.
    summary = run_pipeline(spark, [f"{hour:%Y-%m-%d-%H:%M}" for hour in hours[:3]])
    assert summary.ok, render_summary(summary)
    # The run's summary counts the marts' main in the catalog (there is no DuckDB file on this target).
    assert set(summary.marts) == set(MART_MODELS), summary.marts
    published = refs(spark)
    assert load_catalog(spark).load_table(("marts", LEGACY_MART)).properties.get(WAP_PROPERTY) == "true"
    assert all(heads["main"] == heads[AUDIT_BRANCH] for heads in published.values()), published
    # What the pipeline left is read by pyiceberg and by DuckDB's iceberg_scan alike, and equals DuckDB's marts.
    counts = compare_marts(spark, duck.duckdb_path)
    assert counts == summary.marts
    exercised = [m for m in MART_MODELS if counts[m] > 0]
    assert len(exercised) >= 8, counts

    # Spark, 3: the last hour re-run with the project's own data tests and every unit test (the generic ones passed on
    # Spark in step 2), warnings as errors: the models run (those below fct_deliveries are skipped once its check
    # fails), the payment-reconciliation check fails, and the gate holds:
    # every mart's main is the snapshot it was, readers (pyiceberg, iceberg_scan) still see the marts that equal
    # DuckDB's, while the branch holds the re-run's writes, equal to them too (a re-run window is idempotent).
    rerun = ["build", "--warn-error", "--exclude", "test_type:generic"]
    result = run_dbt(spark, rerun, window=window_vars(hours[3]), target_path=target, check=False)
    tests_run = [r for r in result.results if r["unique_id"].startswith(("test.", "unit_test."))]
    failed = [r["unique_id"].split(".")[2] for r in tests_run if r["status"] in ("fail", "error")]
    models = [r for r in result.results if r["unique_id"].startswith("model.")]
    assert not result.ok and set(failed) == WARNING_TESTS, failed
    statuses = [r["status"] for r in models]
    manifest = json.loads((target / "manifest.json").read_text())
    singular = {k for k, n in manifest["nodes"].items() if n["resource_type"] == "test" and not n.get("test_metadata")}
    assert {r["unique_id"] for r in tests_run} == singular | set(manifest["unit_tests"]), tests_run  # and no other
    assert set(statuses) <= {"success", "skipped"} and statuses.count("success") > 10, statuses
    held = refs(spark)
    assert {m: h["main"] for m, h in held.items()} == {m: h["main"] for m, h in published.items()}
    assert any(h[AUDIT_BRANCH] != h["main"] for h in held.values()), held
    assert "audit gate: held" in result.output
    assert compare_marts(spark, duck.duckdb_path) == counts
    assert compare_marts(spark, duck.duckdb_path, branch=AUDIT_BRANCH) == counts

    # Spark's Derby metastore and log went to its work directory, not to the dbt project or the repository.
    assert (spark_work_dir(spark) / "derby.log").exists()
    for leftover in ("metastore_db", "derby.log"):
        assert not (DBT_PROJECT_DIR / leftover).exists() and not (PROJECT_ROOT / leftover).exists()
