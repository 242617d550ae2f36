"""`make test`'s scheduling: the groups tests/conftest.py gives (a shared world, a real engine's module) reach
pytest-xdist, so that a module-scoped world is built once, on one worker (docs/operations.md, "The test suite").

A pytest run in a subprocess on a throwaway project whose conftest is ours: a module of five tests sharing a
module-scoped world must run on one worker and build it once, under `--dist loadgroup` on three workers.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from logistics_platform.settings import PROJECT_ROOT

PROBE = """
import pytest

pytestmark = pytest.mark.jdk  # as the real engine's modules are: grouped by module

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with open({log!r}, "a") as f:
        f.write("built\\n")

@pytest.mark.parametrize("n", range(5))
def test_shares_the_world(world, n):
    pass

@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    pass
"""


def test_a_modules_world_is_built_once_on_one_worker(tmp_path: Path) -> None:
    log = tmp_path / "built.log"
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    (tmp_path / "test_probe.py").write_text(PROBE.format(log=str(log)))
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    args = ["-v", "-p", "no:cacheprovider", "-n", "3", "--dist", "loadgroup", "-o", "markers=jdk"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, str(tmp_path / "test_probe.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers = set(re.findall(r"\[(gw\d+)\].*PASSED .*test_shares_the_world", done.stdout))
    assert len(workers) == 1, f"the module's tests ran on {sorted(workers)}: its group did not reach pytest-xdist"
    assert log.read_text().count("built") == 1
