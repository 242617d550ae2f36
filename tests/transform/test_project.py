"""Pure parts of the transform domain: the arrival window as dbt vars/env, fold arguments, bronze view typing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze import schema as bronze_schema
from logistics_platform.lib.bronze.views import (
    BRONZE_TABLE_NAMES,
    bronze_tables,
    current_metadata_locations,
    empty_select,
    sqlite_metadata_locations,
)
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.transform.late import FoldError, resolve_topic, window_start
from logistics_platform.lib.transform.project import (
    DbtError,
    dbt_executable,
    dbt_project,
    join_selection_values,
    prepare_manifest,
    project_target,
    prune_run_targets,
    run_dbt,
    window_env,
    window_vars,
)
from logistics_platform.settings import DBT_PROJECT_DIR, dbt_environment, local_settings, subprocess_env


def test_window_vars_are_inclusive_hour_starts() -> None:
    assert window_vars(datetime(2026, 11, 2, 3, 17)) == {
        "min_arrival_hour": "2026-11-02 03:00:00",
        "max_arrival_hour": "2026-11-02 03:00:00",
    }
    assert window_vars(datetime(2026, 11, 2, 3), datetime(2026, 11, 2, 5)) == {
        "min_arrival_hour": "2026-11-02 03:00:00",
        "max_arrival_hour": "2026-11-02 05:00:00",
    }
    with pytest.raises(ValueError, match="before it starts"):
        window_vars(datetime(2026, 11, 2, 5), datetime(2026, 11, 2, 3))


def test_window_env_names_match_the_dbt_macro() -> None:
    env = window_env(window_vars(datetime(2026, 11, 2, 3)))
    assert env == {
        "LOGISTICS_DBT_MIN_ARRIVAL_HOUR": "2026-11-02 03:00:00",
        "LOGISTICS_DBT_MAX_ARRIVAL_HOUR": "2026-11-02 03:00:00",
    }
    from logistics_platform.settings import DBT_PROJECT_DIR

    macro = (DBT_PROJECT_DIR / "macros" / "arrival_window.sql").read_text()
    assert "'LOGISTICS_DBT_' ~ (name | upper)" in macro


def test_fold_arguments_are_validated() -> None:
    assert resolve_topic("orders") == "oltp.public.orders"
    assert resolve_topic("logistics.tracking_pings") == "logistics.tracking_pings"
    with pytest.raises(FoldError, match="feeds no event-time window"):
        resolve_topic("tenants")
    assert window_start(datetime(2026, 11, 2, 3)) == datetime(2026, 11, 2, 3)
    with pytest.raises(FoldError, match="not an hour start"):
        window_start(datetime(2026, 11, 2, 3, 30))


def test_empty_bronze_views_have_the_contract_types() -> None:
    con = duck.connect()
    for name, schema in bronze_tables().items():
        described = con.sql(f"describe {empty_select(schema)}").fetchall()
        assert [r[0] for r in described] == [f.name for f in schema.fields], name
    orders = dict(
        (r[0], r[1])
        for r in con.sql(
            f"describe {empty_select(bronze_schema.table_schema(bronze_schema.TOPICS['orders']))}"
        ).fetchall()
    )
    assert orders["total_amount"] == "DECIMAL(12,2)" and orders["_arrival_hour"] == "TIMESTAMP"


def test_bronze_table_names_match_the_contract() -> None:
    assert set(BRONZE_TABLE_NAMES) == set(bronze_tables())


def test_sqlite_pointer_read_equals_the_catalog_and_tolerates_a_missing_catalog(tmp_path: Path) -> None:
    from pyiceberg.types import LongType

    settings = local_settings(tmp_path)
    assert sqlite_metadata_locations(settings, "bronze", BRONZE_TABLE_NAMES) == dict.fromkeys(BRONZE_TABLE_NAMES)
    catalog = load_catalog(settings)
    assert sqlite_metadata_locations(settings, "bronze", ["orders"]) == {"orders": None}  # tables, no rows
    catalog.create_table("bronze.orders", Schema(NestedField(1, "order_id", LongType(), required=False)))
    direct = sqlite_metadata_locations(settings, "bronze", BRONZE_TABLE_NAMES)
    assert direct == current_metadata_locations(catalog, "bronze", BRONZE_TABLE_NAMES)
    assert direct["orders"] is not None and direct["orders"].endswith(".metadata.json")
    assert direct["payments"] is None


def test_dbt_plugin_import_stays_light() -> None:
    # Every dbt process imports the plugin: pyiceberg and SQLAlchemy would add ~0.7 s to each hourly run.
    code = (
        "import sys, logistics_platform.lib.transform.dbt_plugin; "
        "print(sorted({'pyiceberg', 'sqlalchemy'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_prune_run_targets_keeps_the_newest(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for i in range(5):
        (runs / f"run{i}").mkdir(parents=True)
        os.utime(runs / f"run{i}", (1_000_000 + i, 1_000_000 + i))
    deleted = prune_run_targets(runs, keep=2)
    assert sorted(p.name for p in deleted) == ["run0", "run1", "run2"]
    assert sorted(p.name for p in runs.iterdir()) == ["run3", "run4"]
    assert prune_run_targets(tmp_path / "absent") == []


def test_dbt_environment_applies_the_settings_only_around_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DbtCliResource.cli snapshots os.environ: the settings and the window are there during the call only."""
    monkeypatch.setenv("DUCKDB_PATH", "/elsewhere.duckdb")
    monkeypatch.delenv("LOGISTICS_DBT_MIN_ARRIVAL_HOUR", raising=False)
    settings = local_settings(tmp_path, s3_region="eu-west-3")
    before = dict(os.environ)
    with dbt_environment(settings, {"LOGISTICS_DBT_MIN_ARRIVAL_HOUR": "2026-11-02 03:00:00"}):
        assert os.environ["DUCKDB_PATH"] == str(settings.duckdb_path)
        assert os.environ["ICEBERG_S3_REGION"] == "eu-west-3"
        assert os.environ["LOGISTICS_DBT_MIN_ARRIVAL_HOUR"] == "2026-11-02 03:00:00"
    # The next run must not inherit this one's window, nor the caller lose its own values.
    assert dict(os.environ) == before


def test_dbt_without_the_platform_environment_fails_naming_the_setting(tmp_path: Path) -> None:
    """profiles.yml and the macros have no defaults of their own: the platform always sets them (settings.dbt_env)."""
    settings = local_settings(tmp_path)
    env = {k: v for k, v in subprocess_env(settings).items() if k != "SLA_WINDOW_MINUTES"}
    project = ["--project-dir", str(DBT_PROJECT_DIR), "--profiles-dir", str(DBT_PROJECT_DIR)]
    scratch = ["--target-path", str(tmp_path / "target"), "--log-path", str(tmp_path / "logs")]
    out = subprocess.run(
        [dbt_executable(), "parse", "--no-partial-parse", *project, *scratch],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0
    assert "Env var required but not provided: 'SLA_WINDOW_MINUTES'" in out.stdout


def test_manifest_is_keyed_by_target_and_database(tmp_path: Path) -> None:
    """The definitions of one checkout never load a manifest parsed for other settings."""
    plain = local_settings(tmp_path)
    other = local_settings(tmp_path, duckdb_path=tmp_path / "analytics_full.duckdb")
    assert project_target(plain).name.startswith("local-analytics-")
    assert project_target(other).name.startswith("local-analytics_full-")
    manifest = json.loads(dbt_project(other).manifest_path.read_text())
    assert manifest["nodes"]["model.logistics.fct_daily_revenue"]["database"] == "analytics_full"
    assert (
        manifest["nodes"]["model.logistics.fct_daily_revenue"]["database"]
        != json.loads(dbt_project(plain).manifest_path.read_text())["nodes"]["model.logistics.fct_daily_revenue"][
            "database"
        ]
    )


def test_selection_values_are_joined_for_dbt_cli_resource() -> None:
    assert join_selection_values(["build", "--exclude", "resource_type:test", "resource_type:unit_test"]) == [
        "build",
        "--exclude",
        "resource_type:test resource_type:unit_test",
    ]
    assert join_selection_values(["build", "-s", "a", "b", "--full-refresh", "--exclude", "c"]) == [
        "build", "-s", "a b", "--full-refresh", "--exclude", "c",
    ]  # fmt: skip
    assert join_selection_values(["show", "--inline", "select 1"]) == ["show", "--inline", "select 1"]


def test_runs_get_a_directory_of_their_own_under_the_project_target(tmp_path: Path) -> None:
    """dagster-dbt creates each invocation's directory under DBT_TARGET_PATH, seeded with the partial-parse state of
    the same settings: settings that differ only in where their DuckDB file is (the same target and database name)
    get their own state, so a run of one after the other was prepared re-parses nothing."""
    settings = local_settings(tmp_path / "one")
    neighbour = local_settings(tmp_path / "two")
    shared = project_target(settings)
    assert shared != project_target(neighbour) and shared.name.split("-")[:2] == ["local", "analytics"]
    try:
        assert prepare_manifest(settings) == shared / "manifest.json"
        prepare_manifest(neighbour)
        assert (shared / "partial_parse.msgpack").exists()
        first = run_dbt(settings, ["ls", "--select", "stg_orders"])
        assert "logistics.staging.stg_orders" in first.output
        (run1,) = [p for p in shared.iterdir() if p.is_dir()]
        assert (run1 / "partial_parse.msgpack").exists()
        log = (run1 / "dbt.log").read_text()
        assert "Unable to do partial parsing" not in log and "PartialParsingEnabled" in log
    finally:
        for target in (shared, project_target(neighbour)):
            shutil.rmtree(target, ignore_errors=True)


def test_the_first_run_of_unprepared_settings_leaves_the_parse_state_for_the_next(tmp_path: Path) -> None:
    """Settings never prepared (a test's, a one-off `logistics-platform dbt`): the first invocation parses the whole
    project and leaves its state in the project target, so the next one, in a directory of its own, parses nothing."""
    settings = local_settings(tmp_path)
    try:
        logs = []
        for n in (1, 2):
            run_dbt(settings, ["ls", "--select", "stg_orders"], target_path=tmp_path / f"run{n}")
            logs.append((tmp_path / f"run{n}" / "dbt.log").read_text())
        assert "Unable to do partial parsing" in logs[0]
        assert "Unable to do partial parsing" not in logs[1] and "PartialParsingEnabled" in logs[1]
    finally:
        shutil.rmtree(project_target(settings), ignore_errors=True)


@pytest.mark.slow
def test_dbt_failures_raise_with_the_cause(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    with pytest.raises(DbtError, match="no-such-flag"):
        run_dbt(settings, ["build", "--no-such-flag"], target_path=tmp_path / "target")
    with pytest.raises(DbtError, match="no_such_table"):
        run_dbt(settings, ["show", "--inline", "select * from no_such_table"], target_path=tmp_path / "target")
    # The dbt process is gone with its invocation: this process can open the file for writing.
    con = duck.connect(settings.duckdb_path)
    assert con.sql("select 1").fetchone() == (1,)
    con.close()
