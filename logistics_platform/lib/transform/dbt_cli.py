"""The one module that overrides dagster-dbt internals (``dbt --version`` in a child process, an in-process adapter
before every dbt run): why it stays, and when to drop it, in docs/internals/glue.md; tests/transform/test_dbt_cli.py."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from functools import cached_property
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

from dagster_dbt import DbtCliResource
from packaging import version


def installed_dbt_version(dbt_executable: str) -> version.Version | None:
    """The dbt-core version installed in the venv of ``dbt_executable`` (``<venv>/bin/dbt``), None if not in one."""
    venv = Path(shutil.which(dbt_executable) or dbt_executable).parent.parent
    if not (venv / "pyvenv.cfg").is_file():
        return None
    site_packages = [str(p) for p in sorted(venv.glob("lib/python*/site-packages"))]
    return next((version.parse(d.version) for d in distributions(name="dbt-core", path=site_packages)), None)


class PlatformDbtCliResource(DbtCliResource):
    """``DbtCliResource`` that reads dbt's version from its venv and builds no in-process adapter."""

    @cached_property
    def _cli_version(self) -> version.Version:
        installed = installed_dbt_version(self.dbt_executable)
        return installed if installed is not None else super()._cli_version

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> Any:
        return None
