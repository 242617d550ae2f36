"""Another engine reads our tables: Apache Spark 3.5 with Iceberg's own Java JdbcCatalog opens the PostgreSQL
catalog that the pipeline wrote, reads every bronze and mart table, and computes the current state of the orders and
revenue per tenant and day from bronze.orders, which must equal the marts; it reads an embedded SQLite catalog's
bronze tables too. Iceberg's reference implementation checking the tables pyiceberg wrote.

Spark runs in its own venv (.venv-spark, built by scripts/spark_env.sh when missing) as a subprocess running
tests/support/spark_driver.py; it needs a JDK.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy.engine import make_url

from logistics_platform.cli.render import render_summary
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import PROJECT_ROOT, Settings, local_settings
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
EMBEDDED_NAME = "embedded"


def _export(settings: Settings, namespaces: tuple[str, ...], out: Path, tables: dict[str, str]) -> dict[str, dict]:
    """Writes pyiceberg's read of every table of ``namespaces`` to parquet (path into ``tables``); what it read."""
    catalog = load_catalog(settings)
    out.mkdir(exist_ok=True)
    expected = {}
    for namespace in namespaces:
        for ident in catalog.list_tables(namespace):
            name = ".".join((settings.catalog_name, *ident))
            table = catalog.load_table(ident)
            rows = table.scan().to_arrow()
            pq.write_table(rows, out / f"{name}.parquet")
            snapshot = table.current_snapshot()
            tables[name] = str(out / f"{name}.parquet")
            expected[name] = {
                "rows": rows.num_rows,
                "columns": rows.column_names,
                "main_snapshot": snapshot.snapshot_id if snapshot else None,
            }
    return expected


@pytest.fixture(scope="module")
def spark_python() -> Path:
    """.venv-spark's python; the script builds the venv on a clean clone and returns at once when it is up to date."""
    # Inherits the test's stdout and stderr: the build's progress lines show with `pytest -s`, and on a failure.
    built = subprocess.run(["bash", str(SPARK_ENV_SCRIPT)], check=False)
    assert built.returncode == 0, "scripts/spark_env.sh failed: its output is in the captured stdout/stderr"
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
    assert summary.ok, render_summary(summary)

    # The embedded profile too: one arrival hour into a SQLite catalog, read by Spark through sqlite-jdbc.
    embedded = local_settings(tmp_path / "embedded", landing_dir=landing, catalog_name=EMBEDDED_NAME)
    ingest_hour(embedded, world.start)

    tables: dict[str, str] = {}
    expected = _export(settings, (bs.NAMESPACE, "marts"), tmp_path / "export", tables)
    expected |= _export(embedded, (bs.NAMESPACE,), tmp_path / "export", tables)
    assert {f"{CATALOG_NAME}.marts.{m}" for m in MART_MODELS} <= set(tables)
    bronze = [*bs.TOPICS, bs.QUARANTINE_TABLE, bs.INGEST_LOG_TABLE]
    assert {f"{name}.bronze.{t}" for t in bronze for name in (CATALOG_NAME, EMBEDDED_NAME)} <= set(tables)

    url = make_url(pg_database)
    pg_catalog = {
        "uri": f"jdbc:postgresql://{url.host}:{url.port}/{url.database}",
        "user": url.username,
        "warehouse": settings.warehouse,
    }
    config = {
        "catalogs": {
            CATALOG_NAME: pg_catalog,
            DEFAULT_NAME: pg_catalog,
            EMBEDDED_NAME: {
                "uri": f"jdbc:sqlite:{make_url(embedded.catalog_uri).database}",
                "warehouse": embedded.warehouse,
            },
        },
        "queries_catalog": CATALOG_NAME,
        "tables": tables,
        "jars": str(SPARK_VENV / "jars"),
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
    assert result["namespaces"] == {
        CATALOG_NAME: ["bronze", "marts"],
        DEFAULT_NAME: [],
        EMBEDDED_NAME: ["bronze", "marts"],
    }
    for name in (CATALOG_NAME, EMBEDDED_NAME):
        assert result["listed"][name] == sorted(t for t in tables if t.startswith(f"{name}."))
    assert set(result["tables"]) == set(tables)
    for name, seen in result["tables"].items():
        want = expected[name]
        assert (seen["rows"], seen["columns"]) == (want["rows"], want["columns"]), name
        assert seen["main_snapshot"] == want["main_snapshot"], f"{name}: Spark and pyiceberg see different snapshots"
        assert (seen["only_left"], seen["only_right"]) == (0, 0), f"{name}: Spark and pyiceberg read different rows"
    seen_rows = {name: seen["rows"] for name, seen in result["tables"].items()}
    assert seen_rows[f"{CATALOG_NAME}.bronze.orders"] > seen_rows[f"{CATALOG_NAME}.marts.fct_orders"] > 0
    assert seen_rows[f"{CATALOG_NAME}.bronze.quarantine"] > 0 and seen_rows[f"{CATALOG_NAME}.marts.late_events"] > 0
    assert 0 < seen_rows[f"{EMBEDDED_NAME}.bronze.orders"] < seen_rows[f"{CATALOG_NAME}.bronze.orders"]

    for mart, diff in result["queries"].items():
        assert diff["rows"] > 0 and diff["rows"] == diff["other_rows"], (mart, diff)
        assert (diff["only_left"], diff["only_right"]) == (0, 0), f"Spark's {mart} differs from the mart: {diff}"
