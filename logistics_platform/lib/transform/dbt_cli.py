"""The one module that overrides dagster-dbt internals: ``DbtCliResource`` without two start-up costs it pays before
every dbt run (``dbt --version`` in a child process; an in-process dbt adapter for metadata fetches we never call).
Why it stays, and when to drop it: docs/internals/glue.md; tests/transform/test_dbt_cli.py pins what it relies on."""

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
    found = [d.version for d in distributions(path=site_packages) if (d.metadata["Name"] or "").lower() == "dbt-core"]
    return version.parse(found[0]) if found else None


class PlatformDbtCliResource(DbtCliResource):
    """``DbtCliResource`` that reads dbt's version from its venv and builds no in-process adapter."""

    @cached_property
    def _cli_version(self) -> version.Version:
        installed = installed_dbt_version(self.dbt_executable)
        return installed if installed is not None else super()._cli_version

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> Any:
        return None
