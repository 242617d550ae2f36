"""The whole pipeline in the prod profile: Iceberg catalog and Dagster instance on PostgreSQL, warehouse on S3.

Ingest -> dbt -> publish through `run_pipeline` (the platform's own Dagster jobs on the instance of
dagster.prod.yaml), then the nightly maintenance job; the published marts equal those the embedded profile (SQLite
catalog, local files, throwaway instance) builds from the same landing data (the session's ``embedded_run``, which
the pipeline test checks on its own).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from pyiceberg.catalog import Catalog

from logistics_platform.cli import main
from logistics_platform.cli.render import render_summary
from logistics_platform.definitions import build_definitions
from logistics_platform.defs.constants import MAINTENANCE_JOB
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import dbt_env
from tests.conftest import EmbeddedRun, S3Warehouse
from tests.support.prod import prod_instance, prod_settings
from tests.support.s3 import SECRET_ACCESS_KEY

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.s3]

ORPHAN_KEY = "data/00000-0-orphan-planted.parquet"


def _scan(catalog: Catalog, mart: str) -> str:
    location = str(catalog.load_table(f"marts.{mart}").metadata_location).replace("'", "''")
    return f"iceberg_scan('{location}')"


def test_the_prod_profile_on_postgres_and_s3_builds_the_marts_of_the_embedded_profile(
    tmp_path: Path,
    pg_database: str,
    s3_warehouse: S3Warehouse,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    embedded_run: EmbeddedRun,
) -> None:
    embedded, landing = embedded_run.settings, embedded_run.settings.landing_dir
    assert embedded_run.summary.ok

    home = tmp_path / "dagster_home"
    # Maintenance that expires every snapshot it may and removes any unreferenced file: all of it runs on S3.
    prod = prod_settings(
        tmp_path / "prod",
        landing,
        pg_database,
        **s3_warehouse.env,
        DAGSTER_HOME=str(home),
        SNAPSHOT_RETENTION_DAYS="0",
        SNAPSHOT_MIN_KEEP="1",
        ORPHAN_SAFETY_DAYS="0",
    )
    assert prod.env == "prod" and prod.warehouse.startswith("s3://")
    s3, bucket = s3_warehouse.server, s3_warehouse.bucket
    with prod_instance(home, pg_database, monkeypatch) as instance:
        summary = run_pipeline(prod)
        assert summary.ok, render_summary(summary)
        assert set(summary.marts) == set(MART_MODELS)
        assert len(instance.get_run_records()) == len(summary.runs)  # the runs are the PostgreSQL instance's

        catalog = load_catalog(prod)
        orders = catalog.load_table("bronze.orders")
        manifest_lists_before = {s.manifest_list for s in orders.snapshots()}
        table_prefix = orders.location().split(f"s3://{bucket}/", 1)[1]
        s3.client().put_object(Bucket=bucket, Key=f"{table_prefix}/{ORPHAN_KEY}", Body=b"not iceberg")

        maintenance = build_definitions(prod).resolve_job_def(MAINTENANCE_JOB).execute_in_process(instance=instance)
        assert maintenance.success
        stored = "\n".join(
            dg.serialize_value(e) for r in instance.get_run_records() for e in instance.all_logs(r.dagster_run.run_id)
        )

    keys = set(s3.keys(bucket))
    assert f"{table_prefix}/{ORPHAN_KEY}" not in keys  # orphan listing and removal on S3
    orders = load_catalog(prod).load_table("bronze.orders")
    expired = manifest_lists_before - {s.manifest_list for s in orders.snapshots()}
    assert expired and not {m.split(f"s3://{bucket}/", 1)[1] for m in expired} & keys  # deleted with the expiry
    # Every table file is in the bucket: none was written under the prod root on local disk.
    assert not [p for p in (tmp_path / "prod").rglob("*") if p.suffix in {".parquet", ".avro", ".json"}]
    assert any(k.startswith("warehouse/marts/") for k in keys) and any(k.startswith("warehouse/bronze/") for k in keys)

    # The S3 secret key reached pyiceberg, dbt and DuckDB, and none of them kept it: not the Dagster events, nor the
    # DuckDB file (its S3 secret is a temporary one), nor the tables' metadata in the bucket.
    assert "bronze_ingest" in stored and SECRET_ACCESS_KEY not in stored
    assert SECRET_ACCESS_KEY.encode() not in prod.duckdb_path.read_bytes()
    metadata = [k for k in keys if k.endswith(".metadata.json")]
    assert metadata and not [
        k for k in metadata if SECRET_ACCESS_KEY.encode() in s3.client().get_object(Bucket=bucket, Key=k)["Body"].read()
    ]

    prod_catalog, embedded_catalog = load_catalog(prod), load_catalog(embedded)
    con = connect(settings=prod)  # reads the S3 tables through httpfs, the local ones from disk
    for mart in MART_MODELS:
        ours, theirs = _scan(prod_catalog, mart), _scan(embedded_catalog, mart)
        (rows,) = con.execute(f"select count(*) from {ours}").fetchone() or (0,)
        assert rows == summary.marts[mart], mart
        for left, right in ((ours, theirs), (theirs, ours)):
            extra = con.execute(f"select count(*) from (select * from {left} except all select * from {right})")
            assert extra.fetchone() == (0,), f"marts.{mart} differs between the prod and the embedded profile"

    # The commands that read the tables through DuckDB do so on S3 too: the accounting of every landed hour, and
    # a query as of the current snapshot.
    for key, value in dbt_env(prod).items():
        monkeypatch.setenv(key, value)
    assert main(["verify"]) == 0
    current = load_catalog(prod).load_table("bronze.orders").current_snapshot()
    assert current is not None
    assert main(["time-travel", "orders", "--as-of", str(current.snapshot_id)]) == 0
    out = capsys.readouterr().out
    assert f"snapshot {current.snapshot_id}" in out and str(summary.bronze["orders"]) in out
