"""Pure parts of the transform domain: the arrival window as dbt vars/env, fold arguments, bronze view typing."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, StringType, TimestampType

from logistics_platform.lib import connections as duck
from logistics_platform.lib.bronze import schema as bronze_schema
from logistics_platform.lib.bronze.schema import partition_spec
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
    ensure_manifest,
    join_selection_values,
    keep_partial_parse,
    manifest_key,
    project_fingerprint,
    project_target,
    prune_run_targets,
    run_dbt,
    window_env,
    window_vars,
)
from logistics_platform.lib.transform.window_plan import (
    LOOKBACK_HOURS,
    WindowPlan,
    active_tables,
    built_relations,
    idle_models,
    record_static_builds,
    unchanged_static_nodes,
    upstream_sources,
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
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from logistics_platform.lib.connections import load_catalog

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


def test_manifest_is_keyed_by_target_and_database_and_parsed_when_the_project_changes(tmp_path: Path) -> None:
    """The definitions of one checkout never load a manifest parsed for other settings or older files."""
    plain = local_settings(tmp_path)
    other = local_settings(tmp_path, duckdb_path=tmp_path / "analytics_full.duckdb")
    assert manifest_key(plain) == "local-analytics" and manifest_key(other) == "local-analytics_full"
    assert project_target(plain) != project_target(other)
    manifest = json.loads(dbt_project(other).manifest_path.read_text())
    assert manifest["nodes"]["model.logistics.fct_daily_revenue"]["database"] == "analytics_full"
    assert (
        manifest["nodes"]["model.logistics.fct_daily_revenue"]["database"]
        != json.loads(dbt_project(plain).manifest_path.read_text())["nodes"]["model.logistics.fct_daily_revenue"][
            "database"
        ]
    )
    # The fingerprint follows the files' content, not their modification times.
    project = tmp_path / "project"
    shutil.copytree(DBT_PROJECT_DIR, project, ignore=shutil.ignore_patterns("target", "logs"))
    first = project_fingerprint(plain, project)
    os.utime(project / "models" / "marts" / "fct_orders.sql", (1, 1))
    assert project_fingerprint(plain, project) == first
    with (project / "macros" / "arrival_window.sql").open("a") as f:
        f.write("\n")
    assert project_fingerprint(plain, project) != first
    assert project_fingerprint(other, project) != project_fingerprint(plain, project)


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


def test_runs_start_from_the_partial_parse_state_the_last_run_left(tmp_path: Path) -> None:
    """dagster-dbt seeds each invocation's directory from DBT_TARGET_PATH: the state the last run left there."""
    settings = local_settings(tmp_path, duckdb_path=tmp_path / "partial_state_test.duckdb")
    shared = project_target(settings)
    try:
        ensure_manifest(settings)
        first = run_dbt(settings, ["ls", "--select", "stg_orders"])
        assert "logistics.staging.stg_orders" in first.output
        (run1,) = [p for p in shared.iterdir() if p.is_dir()]
        # dbt parsed in that run (another DuckDB path of the same key): the next run starts from its state.
        (run1 / "partial_parse.msgpack").write_bytes(b"parsed-by-run1")
        keep_partial_parse(settings, run1)
        assert (shared / "partial_parse.msgpack").read_bytes() == b"parsed-by-run1"
    finally:
        shutil.rmtree(shared, ignore_errors=True)


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


def _manifest() -> dict:
    def model(name: str, schema: str, *parents: str) -> tuple[str, dict]:
        return f"model.p.{name}", {
            "resource_type": "model", "name": name, "alias": name, "schema": schema,
            "depends_on": {"nodes": list(parents)},
        }  # fmt: skip

    nodes = dict(
        [
            model("stg_tenants", "staging", "source.p.bronze.tenants"),
            model("dim_tenant", "marts", "model.p.stg_tenants"),
            model("stg_orders", "staging", "source.p.bronze.orders"),
            model("fct_revenue", "marts", "model.p.stg_orders", "model.p.dim_tenant", "seed.p.tier_pricing"),
            model("fct_orders", "marts", "model.p.stg_orders"),
            model("stg_folded", "staging", "source.p.ops.folded_windows"),
            model("late", "marts", "model.p.stg_orders", "model.p.stg_folded"),
        ]
    )
    nodes["seed.p.tier_pricing"] = {"resource_type": "seed", "name": "tier_pricing", "depends_on": {"nodes": []}}
    sources = {
        "source.p.bronze.tenants": {"source_name": "bronze", "name": "tenants"},
        "source.p.bronze.orders": {"source_name": "bronze", "name": "orders"},
        "source.p.ops.folded_windows": {"source_name": "ops", "name": "folded_windows"},
    }
    return {"nodes": nodes, "sources": sources}


def test_idle_models_are_built_bronze_only_models_without_new_rows() -> None:
    manifest = _manifest()
    built = {"staging.stg_tenants", "marts.dim_tenant", "staging.stg_orders", "marts.fct_revenue", "marts.fct_orders"}
    built |= {"staging.stg_folded", "marts.late"}
    # No tenant rows: the tenant chain is idle; revenue reads a seed too and always runs.
    assert idle_models(manifest, {"orders"}, built) == ["stg_tenants", "dim_tenant"]
    # No rows at all: the ops table and the seed keep their readers running.
    assert idle_models(manifest, set(), built) == ["stg_orders", "stg_tenants", "dim_tenant", "fct_orders"]
    # A model that does not exist yet is built whatever the window holds.
    assert idle_models(manifest, {"orders"}, built - {"marts.dim_tenant"}) == ["stg_tenants"]
    assert idle_models(manifest, {"orders", "tenants"}, built) == []
    assert upstream_sources(manifest, "model.p.late") == {"source.p.bronze.orders", "source.p.ops.folded_windows"}
    assert WindowPlan(idle=("a", "b"), active_sources=frozenset()).exclude_args() == ["--exclude", "a b"]
    assert WindowPlan(idle=(), active_sources=frozenset()).exclude_args() == []


def test_an_affected_set_is_idle_only_with_all_its_readers() -> None:
    def model(name: str, *parents: str, tags: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
        return f"model.p.{name}", {
            "resource_type": "model", "name": name, "alias": name, "schema": "s",
            "depends_on": {"nodes": list(parents)}, "tags": list(tags),
        }  # fmt: skip

    nodes = dict(
        [
            model("stg_tenants", "source.p.bronze.tenants"),
            model("affected_tenants", "model.p.stg_tenants", tags=("affected",)),
            model("dim_tenant", "model.p.stg_tenants", "model.p.affected_tenants"),
            model("stg_orders", "source.p.bronze.orders"),
            model("affected_orders", "model.p.stg_orders", tags=("affected",)),
            model("affected_keys", "model.p.affected_orders", "model.p.affected_tenants", tags=("affected",)),
            model("fct_revenue", "model.p.stg_orders", "model.p.dim_tenant", "model.p.affected_keys"),
        ]
    )
    sources = {
        "source.p.bronze.tenants": {"source_name": "bronze", "name": "tenants"},
        "source.p.bronze.orders": {"source_name": "bronze", "name": "orders"},
    }
    manifest = {"nodes": nodes, "sources": sources}
    built = {f"s.{node['name']}" for node in nodes.values()}
    # No tenant rows: the tenant state is left as it is, but revenue runs and reads the tenant set (through its key
    # set): the set is rebuilt for this window, not read as the last run left it.
    assert idle_models(manifest, {"orders"}, built) == ["stg_tenants", "dim_tenant"]
    # No order rows either: every reader is idle, and so are the sets.
    assert set(idle_models(manifest, set(), built)) == {node["name"] for node in nodes.values()}


def test_window_plan_lookback_matches_the_dbt_project() -> None:
    project = yaml.safe_load((DBT_PROJECT_DIR / "dbt_project.yml").read_text())
    assert project["vars"]["lookback_hours"] == LOOKBACK_HOURS


def test_active_tables_come_from_iceberg_file_bounds(tmp_path: Path) -> None:
    """Real SQLite catalog and Iceberg files: a table is active when a data file's arrival hours overlap the window."""
    settings = local_settings(tmp_path)
    catalog = load_catalog(settings)
    catalog.create_namespace_if_not_exists("bronze")
    schema = Schema(
        NestedField(1, "_arrival_hour", TimestampType(), required=False),
        NestedField(2, "payload", StringType(), required=False),
    )
    for name, hours in {"orders": [1, 5], "tenants": [1], "couriers": []}.items():
        table = catalog.create_table(f"bronze.{name}", schema=schema, partition_spec=partition_spec(schema))
        for hour in hours:  # one append per arrival hour, as the hourly ingest commits
            rows = {"_arrival_hour": [datetime(2026, 11, 2, hour)] * 2, "payload": ["a", "b"]}
            table.append(pa.table(rows, schema=schema.as_arrow()))
    columns = {"orders": "_arrival_hour", "tenants": "_arrival_hour", "couriers": "_arrival_hour", "gone": "_x"}

    def active(first: int, last: int) -> set[str]:
        return active_tables(catalog, columns, datetime(2026, 11, 2, first), datetime(2026, 11, 2, last))

    assert active(1, 1) == {"orders", "tenants"}
    assert active(2, 4) == set()  # between the appends: no file's bounds reach in
    assert active(4, 5) == {"orders"}
    # Dagster's windows carry a zone; bronze hours are naive UTC.
    assert active_tables(
        catalog, columns, datetime(2026, 11, 2, 5, tzinfo=UTC), datetime(2026, 11, 2, 5, tzinfo=UTC)
    ) == {"orders"}
    assert built_relations(tmp_path / "missing.duckdb") == {}
    con = duck.connect(tmp_path / "built.duckdb")
    con.execute("create schema marts; create table marts.fct_orders (x int)")
    con.close()
    assert built_relations(tmp_path / "built.duckdb") == {"marts.fct_orders": None}


def test_seeds_and_views_are_skipped_until_what_they_are_built_from_changes(tmp_path: Path) -> None:
    """The project's real manifest and a real DuckDB file: a recorded build is skipped until the project changes."""
    manifest = json.loads(dbt_project(local_settings(tmp_path)).manifest_path.read_text())
    path = tmp_path / "analytics.duckdb"
    con = duck.connect(path)
    con.execute("create schema reference; create table reference.tier_pricing (tier varchar)")
    con.execute("create schema staging; create view staging.stg_folded_windows as select 1 as x")
    con.close()
    assert unchanged_static_nodes(manifest, built_relations(path)) == []  # never recorded: built by hand

    results = [
        {"unique_id": "seed.logistics.tier_pricing", "status": "success"},
        {"unique_id": "model.logistics.stg_folded_windows", "status": "success"},
        {"unique_id": "model.logistics.stg_orders", "status": "success"},  # incremental: never skipped this way
    ]
    assert record_static_builds(path, manifest, results) == ["stg_folded_windows", "tier_pricing"]
    assert sorted(unchanged_static_nodes(manifest, built_relations(path))) == ["stg_folded_windows", "tier_pricing"]

    # An edited seed file (new checksum), and a view rebuilt without its record, run again.
    edited = copy.deepcopy(manifest)
    edited["nodes"]["seed.logistics.tier_pricing"]["checksum"]["checksum"] = "0" * 64
    assert unchanged_static_nodes(edited, built_relations(path)) == ["stg_folded_windows"]
    con = duck.connect(path)
    con.execute("create or replace view staging.stg_folded_windows as select 2 as x")
    con.close()
    assert unchanged_static_nodes(manifest, built_relations(path)) == ["tier_pricing"]
    # A failed build records nothing.
    assert record_static_builds(path, manifest, [{"unique_id": "seed.logistics.tier_pricing", "status": "error"}]) == []
