"""Another engine reads our tables: Apache Spark 3.5 with Iceberg's own Java JdbcCatalog opens the PostgreSQL
catalog that the pipeline wrote, reads every bronze and mart table, and computes the current state of the orders and
revenue per tenant and day from bronze.orders, which must equal the marts. Iceberg's reference implementation checking
the tables pyiceberg wrote.

Spark runs in its own venv (.venv-spark, built by scripts/spark_env.sh when missing) as a subprocess running
tests/support/spark_driver.py; it needs a JDK.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy.engine import make_url

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import PROJECT_ROOT
from tests.support.prod import prod_settings

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.postgres,
    pytest.mark.skipif(shutil.which("java") is None, reason="no JDK: `java` is not on PATH, and Spark runs on Java 17"),
]

SPARK_ENV_SCRIPT = PROJECT_ROOT / "scripts" / "spark_env.sh"
SPARK_VENV = PROJECT_ROOT / ".venv-spark"
DRIVER = Path(__file__).resolve().parents[1] / "support" / "spark_driver.py"
# Not the default name, so that a reader configured with the default finds nothing (the name filter).
CATALOG_NAME = "fleet_prod"
DEFAULT_NAME = "logistics"


@pytest.fixture(scope="module")
def spark_python() -> Path:
    """.venv-spark's python; the script builds the venv on a clean clone and returns at once when it is up to date."""
    built = subprocess.run(["bash", str(SPARK_ENV_SCRIPT)], stdout=sys.stderr, check=False)
    assert built.returncode == 0, "scripts/spark_env.sh failed (its output is above)"
    return SPARK_VENV / "bin" / "python"


def test_spark_reads_every_table_and_computes_the_marts_from_bronze(
    tmp_path: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch, spark_python: Path
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # an ephemeral Dagster instance
    landing = tmp_path / "landing"
    # Small, with events later than the allowed lateness (1 h here) so that marts.late_events has rows too.
    world = GeneratorConfig(
        start=datetime(2026, 11, 1),
        hours=3,
        seed=17,
        orders_per_day=300,
        pings_per_day=900,
        allowed_lateness_hours=1,
        late_beyond_rate=0.1,
    )
    generate(landing, world)
    settings = prod_settings(
        tmp_path / "prod", landing, pg_database, ICEBERG_CATALOG_NAME=CATALOG_NAME, ALLOWED_LATENESS_HOURS="1"
    )
    summary = run_pipeline(settings)
    assert summary.ok, summary.render()

    # What pyiceberg reads of every table, exported for Spark to compare row for row.
    catalog = load_catalog(settings)
    export = tmp_path / "export"
    export.mkdir()
    tables, expected = {}, {}
    for namespace in (bs.NAMESPACE, "marts"):
        for ident in catalog.list_tables(namespace):
            name = ".".join(ident)
            table = catalog.load_table(ident)
            rows = table.scan().to_arrow()
            pq.write_table(rows, export / f"{name}.parquet")
            snapshot = table.current_snapshot()
            tables[name] = {"parquet": str(export / f"{name}.parquet")}
            expected[name] = {
                "rows": rows.num_rows,
                "columns": rows.column_names,
                "main_snapshot": snapshot.snapshot_id if snapshot else None,
            }
    assert {f"marts.{m}" for m in MART_MODELS} <= set(tables)
    assert {f"bronze.{t}" for t in [*bs.TOPICS, bs.QUARANTINE_TABLE, bs.INGEST_LOG_TABLE]} <= set(tables)

    url = make_url(pg_database)
    config = {
        "catalog": CATALOG_NAME,
        "other_catalog": DEFAULT_NAME,
        "jdbc_uri": f"jdbc:postgresql://{url.host}:{url.port}/{url.database}",
        "jdbc_user": url.username,
        "warehouse": settings.warehouse,
        "jars": str(SPARK_VENV / "jars"),
        "tables": tables,
        "work_dir": str(tmp_path),
    }
    (tmp_path / "spark.json").write_text(json.dumps(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    run = subprocess.run(
        [str(spark_python), str(DRIVER), str(tmp_path / "spark.json")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "DO_NOT_TRACK": "1"},
        check=False,
    )
    assert run.returncode == 0, f"the Spark driver failed:\n{run.stderr[-4000:]}"
    result = json.loads(run.stdout.strip().splitlines()[-1])

    assert result["spark_version"].startswith("3.5.")
    assert {"bronze", "marts"} <= set(result["namespaces"])
    assert result["listed"] == sorted(tables)
    assert result["other_catalog_namespaces"] == []
    for name, seen in result["tables"].items():
        want = expected[name]
        assert (seen["rows"], seen["columns"]) == (want["rows"], want["columns"]), name
        assert seen["main_snapshot"] == want["main_snapshot"], f"{name}: Spark and pyiceberg see different snapshots"
        assert (seen["only_left"], seen["only_right"]) == (0, 0), f"{name}: Spark and pyiceberg read different rows"
    assert result["tables"]["bronze.orders"]["rows"] > result["tables"]["marts.fct_orders"]["rows"] > 0
    assert result["tables"]["bronze.quarantine"]["rows"] > 0 and result["tables"]["marts.late_events"]["rows"] > 0

    for mart, diff in result["queries"].items():
        assert diff["rows"] > 0 and diff["rows"] == diff["other_rows"], (mart, diff)
        assert (diff["only_left"], diff["only_right"]) == (0, 0), f"Spark's {mart} differs from the mart: {diff}"
