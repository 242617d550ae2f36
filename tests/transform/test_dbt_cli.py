"""The dagster-dbt overrides of lib/transform/dbt_cli.py: what they replace still exists, and gives the same answer."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from dagster_dbt import DbtCliResource

from logistics_platform.lib.transform.dbt_cli import PlatformDbtCliResource, installed_dbt_version
from logistics_platform.lib.transform.project import dbt_executable, dbt_resource
from logistics_platform.settings import DBT_PROJECT_DIR, local_settings

OVERRIDDEN = ("_cli_version", "_initialize_dbt_core_adapter")


def test_the_overridden_members_are_dagster_dbts_own() -> None:
    # A dagster-dbt upgrade that renames either would leave the override dead code: this fails instead.
    for name in OVERRIDDEN:
        assert name in vars(DbtCliResource), f"dagster-dbt no longer has DbtCliResource.{name}: revisit dbt_cli.py"
        assert name in vars(PlatformDbtCliResource)


def test_the_version_from_the_venv_is_the_one_dbt_reports(tmp_path: Path) -> None:
    executable = dbt_executable()
    reported = subprocess.run([executable, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"(\d+\.\d+\.\d+)", reported)
    assert match, reported
    resource = dbt_resource(local_settings(tmp_path))
    assert isinstance(resource, PlatformDbtCliResource)
    assert str(resource._cli_version) == match.group(1)


def test_a_dbt_outside_a_venv_has_no_installed_version(tmp_path: Path) -> None:
    assert installed_dbt_version(str(tmp_path / "bin" / "dbt")) is None
    assert installed_dbt_version(str(Path(sys.executable).parent / "dbt")) is not None


def test_a_dbt_without_a_venv_version_is_asked_as_dagster_dbt_does(tmp_path: Path) -> None:
    # Not a venv (no pyvenv.cfg): the override falls back to dagster-dbt's own `dbt --version`.
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    wrapper = tmp_path / "bin" / "dbt"
    wrapper.write_text(f'#!/bin/sh\nexec "{dbt_executable()}" "$@"\n')
    wrapper.chmod(0o755)
    assert installed_dbt_version(str(wrapper)) is None
    resource = PlatformDbtCliResource(project_dir=str(DBT_PROJECT_DIR), dbt_executable=str(wrapper))
    assert resource._cli_version == installed_dbt_version(dbt_executable())
