"""The key under which the warm dbt worker reuses a parsed manifest: what changes it, and what must not."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from logistics_platform.lib.transform.dbt_manifest_cache import ManifestCache, manifest_key, parse_args
from logistics_platform.settings import DBT_PROJECT_DIR, local_settings

HOUR = "2026-11-02 10:00:00"
WINDOW = {"LOGISTICS_DBT_MIN_ARRIVAL_HOUR": HOUR, "LOGISTICS_DBT_MAX_ARRIVAL_HOUR": HOUR}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "dbt_project"
    shutil.copytree(DBT_PROJECT_DIR, copy, ignore=shutil.ignore_patterns("target", "logs"))
    return copy


def _args(project: Path, *extra: str, command: str = "build") -> list[str]:
    return [command, "--project-dir", str(project), "--profiles-dir", str(project), "--target", "local", *extra]


def test_what_an_invocation_runs_and_where_it_writes_does_not_change_the_key(project: Path, tmp_path: Path) -> None:
    env = {"DUCKDB_PATH": "/data/analytics.duckdb", **WINDOW}
    key = manifest_key(_args(project, "--target-path", str(tmp_path / "a")), env)
    assert key is not None
    same_project = [
        _args(project, "--target-path", str(tmp_path / "b"), "--log-path", str(tmp_path / "b" / "logs")),
        _args(project, "--exclude", "stg_tenants", "dim_tenant", "--full-refresh", "--no-write-json"),
        _args(project, command="seed"),
        _args(project, command="parse"),
    ]
    for args in same_project:
        assert manifest_key(args, env) == key, args
    # The window is read at execution only: a new hour keeps the manifest.
    next_hour = {**env, "LOGISTICS_DBT_MIN_ARRIVAL_HOUR": "2026-11-02 11:00:00"}
    assert manifest_key(_args(project), next_hour) == key


def test_anything_parsing_reads_changes_the_key(project: Path) -> None:
    env = {"DUCKDB_PATH": "/data/analytics.duckdb"}
    key = manifest_key(_args(project), env)
    assert manifest_key(_args(project, "--vars", '{"lookback_hours": 2}'), env) != key
    assert manifest_key([*_args(project)[:-1], "prod"], env) != key
    assert manifest_key(_args(project), {**env, "DUCKDB_PATH": "/data/other.duckdb"}) != key
    assert manifest_key(_args(project), {**env, "SOME_VAR_A_MODEL_READS": "1"}) != key

    macro = project / "macros" / "affected.sql"
    stat = macro.stat()
    os.utime(macro, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert manifest_key(_args(project), env) != key
    os.utime(macro, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert manifest_key(_args(project), env) == key
    (project / "models" / "staging" / "stg_new.sql").write_text("select 1 as x\n")
    assert manifest_key(_args(project), env) != key

    # What dbt writes under the project (target/, logs/) is not read by parsing.
    (project / "target" / "runs" / "x").mkdir(parents=True)
    (project / "target" / "runs" / "x" / "partial_parse.msgpack").write_bytes(b"state")
    (project / "logs").mkdir()
    (project / "logs" / "dbt.log").write_text("log")
    changed = manifest_key(_args(project), env)
    (project / "logs" / "dbt.log").write_text("more log")
    assert manifest_key(_args(project), env) == changed


def test_commands_and_flags_it_does_not_know_are_never_served_from_the_cache(project: Path) -> None:
    env: dict[str, str] = {}
    assert manifest_key(_args(project, command="docs"), env) is None
    assert manifest_key(_args(project, command="show"), env) is None
    assert manifest_key(_args(project, "--defer", "--state", "prod-artifacts"), env) is None
    assert manifest_key(_args(project, "--vars={}"), env) != manifest_key(_args(project), env)
    assert manifest_key([], env) is None


def test_a_miss_parses_with_the_invocations_project_and_outputs(project: Path, tmp_path: Path) -> None:
    args = _args(project, "--exclude", "stg_tenants", "--target-path", str(tmp_path / "t"), "--no-write-json")
    assert parse_args(args) == [
        "parse",
        "--project-dir",
        str(project),
        "--profiles-dir",
        str(project),
        "--target",
        "local",
        "--target-path",
        str(tmp_path / "t"),
        "--no-write-json",
    ]


def test_the_cache_holds_the_last_manifest_only() -> None:
    cache = ManifestCache()
    assert cache.get("a") is None
    first = object()
    cache.put("a", first)
    assert cache.get("a") is first
    cache.put("b", object())
    assert cache.get("a") is None
    assert (cache.hits, cache.misses) == (1, 2)


def test_dbt_attaches_the_file_under_the_name_duckdb_gives_it(tmp_path: Path) -> None:
    assert local_settings(tmp_path).duckdb_database == "analytics"
    settings = local_settings(tmp_path)
    assert settings.with_overrides(duckdb_path=tmp_path / "full_refresh.duckdb").duckdb_database == "full_refresh"
    assert settings.with_overrides(duckdb_path=tmp_path / "x.v2.duckdb").duckdb_database == "x"
    with pytest.raises(ValueError, match="plain identifier"):
        _ = settings.with_overrides(duckdb_path=tmp_path / "my-db.duckdb").duckdb_database
