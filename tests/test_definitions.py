"""The code location loads, on the project's settings and on throwaway ones, and validates with Dagster's CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from logistics_platform.definitions import build_definitions
from logistics_platform.settings import PROJECT_ROOT, local_settings


def test_definitions_build_on_temp_settings(tmp_path: Path) -> None:
    defs = build_definitions(local_settings(tmp_path))
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert isinstance(defs, dg.Definitions)
    assert "settings" in (defs.resources or {})
    # Every asset has a description: it is what the UI shows.
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        if node.is_materializable:
            assert node.description, f"{key.to_user_string()} has no description"
    assert keys is not None


def test_dagster_definitions_validate(tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((PROJECT_ROOT / "dagster.yaml").read_text())
    env = {**os.environ, "DAGSTER_HOME": str(home), "DO_NOT_TRACK": "1"}
    dagster = Path(sys.executable).parent / "dagster"
    proc = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "All code locations passed validation" in output
