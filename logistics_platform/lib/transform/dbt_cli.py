"""dagster-dbt's ``DbtCliResource``, less two start-up costs it pays in every run's process: the one module that
overrides dagster-dbt internals, and why.

dagster-dbt 0.29's ``DbtCliResource.cli`` does two things before it starts dbt that this platform never needs:

- ``_cli_version`` runs ``dbt --version``: a whole dbt start-up in a child process (imports, adapters, plugins),
  only to learn whether the executable is dbt Core or the Fusion engine. Ours is always dbt Core, installed in the
  venv beside the executable, so the installed distribution's metadata gives the same version without a process.
- ``_initialize_dbt_core_adapter`` loads the profile and the project and registers the adapter in the run's own
  process, for ``fetch_row_counts()`` / ``fetch_column_metadata()``. The platform calls neither, so no adapter is
  built (on the Spark target it could not be: the project venv has no dbt-spark).

Both are on the path of every dbt step, the live SLA path's included. When dagster-dbt changes either (a public
way to pass the version, or a lazy adapter), this module is where to drop the override; ``tests/transform/
test_dbt_cli.py`` pins what it relies on.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from functools import cached_property
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

from dagster_dbt import DbtCliResource
from packaging import version

DBT_DISTRIBUTION = "dbt-core"


def installed_dbt_version(dbt_executable: str) -> version.Version | None:
    """The dbt-core version installed in the venv of ``dbt_executable`` (``<venv>/bin/dbt``), None if not in one."""
    # A bare name ("dbt", dagster-dbt's default) is the one on PATH; its parent's parent is a venv only if it says so.
    venv = Path(shutil.which(dbt_executable) or dbt_executable).parent.parent
    site_packages = [str(p) for p in sorted(venv.glob("lib/python*/site-packages"))]
    if not (venv / "pyvenv.cfg").is_file() or not site_packages:
        return None
    for dist in distributions(path=site_packages):
        if (dist.metadata["Name"] or "").lower() == DBT_DISTRIBUTION:
            return version.parse(dist.version)
    return None


class PlatformDbtCliResource(DbtCliResource):
    """``DbtCliResource`` that reads dbt's version from its venv and builds no in-process adapter."""

    @cached_property
    def _cli_version(self) -> version.Version:
        installed = installed_dbt_version(self.dbt_executable)
        # Not a venv's dbt (a dbt on PATH, say): ask the executable, as dagster-dbt does.
        return installed if installed is not None else super()._cli_version

    def _initialize_dbt_core_adapter(self, args: Sequence[str]) -> Any:
        # dagster-dbt keeps whatever this returns for its metadata fetches only, which the platform does not call.
        return None
