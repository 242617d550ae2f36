"""The package's import graph: one-way layers (`cli` -> `defs` -> `lib`), no cycles, no private Dagster APIs.

Every module is parsed with `ast` and every import in it counts, at module level or inside a function (a lazy
import is still a dependency), including `importlib.import_module` calls with a literal (or f-string prefix) name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import logistics_platform

PACKAGE = logistics_platform.__name__
ROOT = Path(logistics_platform.__file__).resolve().parent

# layer -> the parts of the package it must not import (any module at or below them).
# The dashboard (Streamlit pages) sits beside `cli` on top of `lib`: it draws what lib computes, runs no Dagster code.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    f"{PACKAGE}.lib": (
        f"{PACKAGE}.defs",
        f"{PACKAGE}.definitions",
        f"{PACKAGE}.cli",
        f"{PACKAGE}.pipeline",
        f"{PACKAGE}.dashboard",
    ),
    f"{PACKAGE}.defs": (f"{PACKAGE}.cli", f"{PACKAGE}.definitions", f"{PACKAGE}.pipeline", f"{PACKAGE}.dashboard"),
    f"{PACKAGE}.dashboard": (f"{PACKAGE}.cli", f"{PACKAGE}.defs", f"{PACKAGE}.definitions", f"{PACKAGE}.pipeline"),
}

# (module, private module it imports) that are known and explained where they are imported. Keep it small: an
# entry that is no longer needed fails the test below, so the list only shrinks.
ALLOWED_PRIVATE: set[tuple[str, str]] = set()

# Cycles that are known and being removed, as their sets of modules; the same rule: a stale entry fails.
ALLOWED_CYCLES: list[set[str]] = []

# The one module that may import pyiceberg internals; everything else (package, tests, benchmarks, scripts) uses the
# public wrappers it defines, so a pyiceberg upgrade has one place to check.
ICEBERG_FENCE = f"{PACKAGE}.lib.iceberg_internals"
REPO = ROOT.parent
OTHER_CODE = ("tests", "benchmarks", "scripts")


@dataclass(frozen=True)
class Import:
    """One import statement's target: ``module`` and, for ``from module import name``, the ``name``."""

    module: str
    name: str | None
    line: int


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file of the package under ``root`` (a package is its ``__init__``)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imports_of(module: str, path: Path) -> Iterator[Import]:
    """Every import in the file, wherever it stands; relative imports resolved against ``module``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package_parts = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, None, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                yield Import(target, alias.name, node.lineno)
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                yield Import(arg.value, None, node.lineno)
            elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                # f"pkg.sub.{name}": every module under the literal prefix may be imported.
                yield Import(str(arg.values[0].value) + "*", None, node.lineno)


def _is_dynamic_import(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("import_module", "__import__")


def resolve(imp: Import, modules: dict[str, Path]) -> set[str]:
    """The package modules an import loads (not counting parent packages, which every submodule import runs)."""
    if imp.module.endswith("*"):
        prefix = imp.module[:-1]
        return {m for m in modules if m.startswith(prefix) and m != prefix.rstrip(".")}
    if imp.name is not None and f"{imp.module}.{imp.name}" in modules:
        return {f"{imp.module}.{imp.name}"}
    return {imp.module} if imp.module in modules else set()


def import_graph(root: Path, package: str) -> tuple[dict[str, set[str]], dict[str, list[Import]]]:
    """Module -> package modules it imports, and module -> every import (for the private-API check)."""
    modules = module_files(root, package)
    graph: dict[str, set[str]] = {}
    raw: dict[str, list[Import]] = {}
    for module, path in modules.items():
        found = list(imports_of(module, path))
        raw[module] = found
        graph[module] = {target for imp in found for target in resolve(imp, modules)} - {module}
    return graph, raw


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path that returns to its start) per strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        # Tarjan's algorithm; the package is small enough for recursion.
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph[node] & group):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                frontier.append(nxt)
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def layer_violations(graph: dict[str, set[str]], forbidden: dict[str, tuple[str, ...]] = FORBIDDEN) -> list[str]:
    """``a -> b`` for every import of a module its layer must not import."""
    out = []
    for module, targets in sorted(graph.items()):
        for layer, banned in forbidden.items():
            if module != layer and not module.startswith(layer + "."):
                continue
            out += [f"{module} -> {t}" for t in sorted(targets) if any(t == b or t.startswith(b + ".") for b in banned)]
    return out


def private_imports(raw: dict[str, list[Import]]) -> set[tuple[str, str, int]]:
    """(module, private module, line) for every import below the top-level namespace of dagster or a dagster_*
    library (their public API is the top-level package), or of an underscore name from it."""
    out = set()
    for module, found in raw.items():
        for imp in found:
            parts = imp.module.split(".")
            if not (parts[0] == "dagster" or parts[0].startswith("dagster_")):
                continue
            if len(parts) > 1 or (imp.name or "").startswith("_"):
                out.add((module, imp.module, imp.line))
    return out


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def private_pyiceberg_imports(raw: dict[str, list[Import]]) -> set[tuple[str, str, int]]:
    """(module, what, line) for every import of a pyiceberg module path with a ``_``-prefixed part, or of a
    ``_``-prefixed name from pyiceberg (dunder names such as ``__version__`` are public)."""
    out = set()
    for module, found in raw.items():
        for imp in found:
            parts = imp.module.rstrip("*").split(".")
            if parts[0] != "pyiceberg":
                continue
            if any(_private(p) for p in parts):
                out.add((module, imp.module, imp.line))
            elif imp.name is not None and _private(imp.name):
                out.add((module, f"{imp.module}.{imp.name}", imp.line))
    return out


# ------------------------------------------------------------------------------------------------- the package


@pytest.fixture(scope="module")
def package_graph() -> tuple[dict[str, set[str]], dict[str, list[Import]]]:
    return import_graph(ROOT, PACKAGE)


def test_the_walk_sees_the_whole_package(package_graph: tuple[dict[str, set[str]], dict[str, list[Import]]]) -> None:
    graph, _ = package_graph
    # Lazy imports count: the CLI's rebuild command imports the definitions inside a function.
    assert f"{PACKAGE}.definitions" in graph[f"{PACKAGE}.cli.rebuild"]
    # importlib with an f-string prefix: the CLI package loads each command module.
    assert f"{PACKAGE}.cli.run" in graph[f"{PACKAGE}.cli"]
    assert {f"{PACKAGE}.defs.operate.jobs", f"{PACKAGE}.defs.bronze.assets"} <= set(graph)


def test_no_import_cycle(package_graph: tuple[dict[str, set[str]], dict[str, list[Import]]]) -> None:
    cycles = find_cycles(package_graph[0])
    unexplained = [c for c in cycles if set(c) not in ALLOWED_CYCLES]
    assert not unexplained, "import cycles: " + "; ".join(" -> ".join(c) for c in unexplained)
    stale = [sorted(group) for group in ALLOWED_CYCLES if group not in [set(c) for c in cycles]]
    assert not stale, f"allow-listed import cycles gone, remove them from ALLOWED_CYCLES: {stale}"


def test_dependencies_point_one_way(package_graph: tuple[dict[str, set[str]], dict[str, list[Import]]]) -> None:
    bad = layer_violations(package_graph[0])
    assert not bad, "imports against cli -> defs -> lib: " + "; ".join(bad)


def test_no_private_dagster_api(package_graph: tuple[dict[str, set[str]], dict[str, list[Import]]]) -> None:
    found = private_imports(package_graph[1])
    unexplained = sorted(f"{m}:{line} imports {p}" for m, p, line in found if (m, p) not in ALLOWED_PRIVATE)
    assert not unexplained, "private Dagster/dagster-dbt imports (use the public API): " + "; ".join(unexplained)
    stale = sorted(f"{m} -> {p}" for m, p in ALLOWED_PRIVATE - {(m, p) for m, p, _ in found})
    assert not stale, "allow-listed private imports no longer made, remove them from ALLOWED_PRIVATE: " + "; ".join(
        stale
    )


def test_pyiceberg_internals_only_in_the_fence(
    package_graph: tuple[dict[str, set[str]], dict[str, list[Import]]],
) -> None:
    raw = dict(package_graph[1])
    for folder in OTHER_CODE:
        raw.update(import_graph(REPO / folder, folder)[1])
    assert "tests.maintenance.test_maintenance" in raw and "benchmarks.ingest" in raw  # the walk sees them
    found = private_pyiceberg_imports(raw)
    outside = sorted(f"{m}:{line} imports {what}" for m, what, line in found if m != ICEBERG_FENCE)
    assert not outside, (
        "private pyiceberg imports outside lib/iceberg_internals.py (give them a public wrapper there, with why): "
        + "; ".join(outside)
    )
    assert any(m == ICEBERG_FENCE for m, _, _ in found), (
        f"{ICEBERG_FENCE} imports nothing private any more: move its code to its callers and drop ICEBERG_FENCE"
    )


# ------------------------------------------------------------------------------------------------- the walker


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_walker_finds_a_lazy_cycle_a_layer_breach_and_a_private_import(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "__init__.py": "",
            "lib/__init__.py": "",
            "lib/a.py": "def f():\n    from pkg.defs import build\n    return build\n",
            "defs/__init__.py": "from . import b\n\nbuild = b\n",
            "defs/b.py": "import dagster as dg\nfrom dagster._core.errors import X\nfrom ..lib import a\n",
            "cli/__init__.py": "import importlib\nfor n in ['c']:\n    importlib.import_module(f'pkg.cli.{n}')\n",
            "cli/c.py": "from pkg.defs.b import dg\n",
        },
    )
    graph, raw = import_graph(tmp_path, "pkg")
    assert graph["pkg.lib.a"] == {"pkg.defs"}
    assert graph["pkg.defs"] == {"pkg.defs.b"}
    assert graph["pkg.defs.b"] == {"pkg.lib.a"}  # relative import resolved to the module, not the package
    assert graph["pkg.cli"] == {"pkg.cli.c"}
    [cycle] = find_cycles(graph)
    assert cycle[0] == cycle[-1] and set(cycle) == {"pkg.lib.a", "pkg.defs", "pkg.defs.b"}
    assert private_imports(raw) == {("pkg.defs.b", "dagster._core.errors", 2)}

    assert layer_violations(graph, {"pkg.lib": ("pkg.defs", "pkg.cli")}) == ["pkg.lib.a -> pkg.defs"]


def test_walker_passes_a_clean_package(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "__init__.py": "",
            "gen/__init__.py": "from pkg.gen.engine import run\n",
            # A submodule importing a sibling through its package name is not an edge to the package itself.
            "gen/engine.py": "from pkg.gen import encode\n\ndef run():\n    return encode\n",
            "gen/encode.py": "import dagster as dg\nfrom dagster_duckdb import DuckDBResource\n",
        },
    )
    graph, raw = import_graph(tmp_path, "pkg")
    assert graph["pkg.gen.engine"] == {"pkg.gen.encode"}
    assert find_cycles(graph) == []
    assert private_imports(raw) == set()


def test_walker_finds_private_pyiceberg_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pyiceberg.io.pyarrow import _dataframe_to_data_files, write_file\n",
            "b.py": "import pyiceberg._private.mod\nfrom pyiceberg.table.update._impl import Producer\n",
            "c.py": "import importlib\n\ndef f():\n    return importlib.import_module('pyiceberg.table._x')\n",
            # Public: plain names, a dunder, and private names of other libraries (the Dagster check's business).
            "d.py": "from pyiceberg import __version__\nfrom pyiceberg.table import Table\n"
            "from dagster._core import y\n",
        },
    )
    _, raw = import_graph(tmp_path, "pkg")
    assert private_pyiceberg_imports(raw) == {
        ("pkg.a", "pyiceberg.io.pyarrow._dataframe_to_data_files", 1),
        ("pkg.b", "pyiceberg._private.mod", 1),
        ("pkg.b", "pyiceberg.table.update._impl", 2),
        ("pkg.c", "pyiceberg.table._x", 4),
    }


def test_no_private_name_crosses_a_module_boundary(
    package_graph: tuple[dict[str, set[str]], dict[str, list[Import]]],
) -> None:
    """A ``_name`` is its module's own: a module that needs it from another wants a public name there."""
    found = sorted(
        f"{m}:{imp.line} imports {imp.module}.{imp.name}"
        for m, imports in package_graph[1].items()
        for imp in imports
        if imp.module.startswith(f"{PACKAGE}.")
        and imp.name is not None
        and imp.name.startswith("_")
        and not imp.name.startswith("__")
    )
    assert not found, "private names imported across modules (make them public where they are defined): " + "; ".join(
        found
    )
