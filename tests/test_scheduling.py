"""`make test`'s scheduling: the groups tests/conftest.py gives (a shared world, a real engine's module) reach
pytest-xdist, so that a module-scoped world is built once, on one worker, and the groups are dealt in the suite's
order, the Spark modules first (docs/operations.md, "The test suite").

Pytest runs in a subprocess on a throwaway project whose conftest is ours: a module of five tests sharing a
module-scoped world must run on one worker and build it once, under `--dist loadgroup` on three workers; on one
worker, a Spark test collected after a larger group must run first under `make test`'s options.
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


def _pytest(tmp_path: Path, modules: dict[str, str], *options: str) -> str:
    """The verbose output of pytest on ``modules`` (name -> text) beside our conftest's hook, under ``options``."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    for name, text in modules.items():
        (tmp_path / name).write_text(text)
    args = ["-v", "-p", "no:cacheprovider", "--dist", "loadgroup", "-o", "markers=jdk spark", *options]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, *modules],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def test_a_modules_world_is_built_once_on_one_worker(tmp_path: Path) -> None:
    log = tmp_path / "built.log"
    out = _pytest(tmp_path, {"test_probe.py": PROBE.format(log=str(log))}, "-n", "3")
    workers = set(re.findall(r"\[(gw\d+)\].*PASSED .*test_shares_the_world", out))
    assert len(workers) == 1, f"the module's tests ran on {sorted(workers)}: its group did not reach pytest-xdist"
    assert log.read_text().count("built") == 1


# Two modules, collected in this order: a group of many tests, then a Spark module of one test.
ORDER_PROBES = {
    "test_a_group.py": """
import pytest

pytestmark = pytest.mark.jdk  # grouped by module, as the real engine's modules are

@pytest.mark.parametrize("n", range(5))
def test_in_a_big_group(n):
    pass
""",
    "test_b_spark.py": """
import pytest

@pytest.mark.spark
def test_spark_alone():
    pass
""",
}


def _order(tmp_path: Path, *options: str) -> list[str]:
    """The tests in the order one worker ran them under ``options``."""
    return re.findall(r"PASSED .*::(test_[a-z_]+)", _pytest(tmp_path, ORDER_PROBES, "-n", "1", *options))


def test_make_test_deals_the_spark_modules_first_whatever_the_size_of_the_groups(tmp_path: Path) -> None:
    recipe = next(line for line in (PROJECT_ROOT / "Makefile").read_text().splitlines() if "-m pytest" in line)
    assert "--no-loadscope-reorder" in recipe.split()
    assert _order(tmp_path, "--no-loadscope-reorder")[0] == "test_spark_alone"
    # pytest-xdist's default deals the groups with the most tests first: the flag is what puts Spark first.
    assert _order(tmp_path)[0] == "test_in_a_big_group"
