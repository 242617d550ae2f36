"""Which dbt models an arrival-hour window leaves unchanged, so that the run can skip them.

Every incremental model recomputes what the bronze rows of its window (plus the lookback) touch. A model whose
bronze sources have no row in that window would run to change nothing: tenants and couriers change in a few hours
of a month, and their six models are ~30% of the nodes of an hourly dbt run, each costing ~0.1 s of dbt's own work.
Skipping is safe only for models that already exist and read nothing but bronze (the operators' fold table and the
seeds make a model always run), and never on a full refresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual

from logistics_platform.lib.bronze_views import BRONZE_SCHEMA
from logistics_platform.lib.catalog import load_catalog
from logistics_platform.settings import Settings

# Default of the dbt var lookback_hours (dbt_project.yml; a test keeps the two equal).
LOOKBACK_HOURS = 1


@dataclass(frozen=True)
class WindowPlan:
    """The models a window's run skips, and why."""

    idle: tuple[str, ...]  # model names
    active_sources: frozenset[str]  # bronze tables with rows in the window (lookback included)

    def exclude_args(self) -> list[str]:
        """dbt flags that leave the idle models (and the tests on them alone) out of the run."""
        return ["--exclude", *self.idle] if self.idle else []


def upstream(manifest: Mapping[str, Any], unique_id: str) -> tuple[set[str], set[str]]:
    """(nodes, sources): unique ids of everything ``unique_id`` reads, directly or through other nodes."""
    nodes, seen, sources = manifest["nodes"], set(), set()
    stack = [unique_id]
    while stack:
        for parent in nodes.get(stack.pop(), {}).get("depends_on", {}).get("nodes", []):
            if parent.startswith("source."):
                sources.add(parent)
            elif parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return seen, sources


def upstream_sources(manifest: Mapping[str, Any], unique_id: str) -> set[str]:
    """Unique ids of every source that ``unique_id`` reads, directly or through other nodes."""
    return upstream(manifest, unique_id)[1]


def depth(manifest: Mapping[str, Any], unique_id: str, memo: dict[str, int] | None = None) -> int:
    """Length of the longest chain of nodes above ``unique_id`` (0 for a node that reads only sources)."""
    memo = {} if memo is None else memo
    if unique_id not in memo:
        parents = manifest["nodes"].get(unique_id, {}).get("depends_on", {}).get("nodes", [])
        memo[unique_id] = max((depth(manifest, p, memo) + 1 for p in parents if p in manifest["nodes"]), default=0)
    return memo[unique_id]


def idle_models(manifest: Mapping[str, Any], active_sources: Iterable[str], built: Iterable[str]) -> list[str]:
    """Models that read only bronze tables without rows in the window and that exist already (``schema.name``).

    In dependency order (parents first), as Dagster wants a multi-asset's outputs.
    """
    active, existing = set(active_sources), {b.lower() for b in built}
    idle: list[tuple[int, str]] = []
    memo: dict[str, int] = {}
    for unique_id, node in manifest["nodes"].items():
        if node.get("resource_type") != "model":
            continue
        relation = f"{node['schema']}.{node.get('alias') or node['name']}".lower()
        parents, sources = upstream(manifest, unique_id)
        # Only bronze feeds it: no seed, no ops table, no other node kind anywhere above it.
        reads_only_bronze = all(manifest["nodes"].get(p, {}).get("resource_type") == "model" for p in parents) and all(
            manifest["sources"][s]["source_name"] == BRONZE_SCHEMA for s in sources
        )
        if (
            sources
            and relation in existing
            and reads_only_bronze
            and not {manifest["sources"][s]["name"] for s in sources} & active
        ):
            idle.append((depth(manifest, unique_id, memo), node["name"]))
    return [name for _, name in sorted(idle)]


def probed_sources(manifest: Mapping[str, Any]) -> dict[str, str]:
    """Bronze table -> its arrival-hour column, for the bronze sources that some model reads."""
    read = {
        s
        for uid, n in manifest["nodes"].items()
        if n.get("resource_type") == "model"
        for s in upstream_sources(manifest, uid)
    }
    return {
        manifest["sources"][s]["name"]: manifest["sources"][s].get("loaded_at_field") or "_arrival_hour"
        for s in sorted(read)
        if manifest["sources"][s]["source_name"] == BRONZE_SCHEMA
    }


def active_tables(catalog: Catalog, columns: Mapping[str, str], lower: datetime, upper: datetime) -> set[str]:
    """Bronze tables with a data file that may hold rows whose arrival hour is in ``lower`` .. ``upper`` (inclusive).

    Decided from Iceberg metadata alone (partition ranges and the column bounds of each data file), never by reading
    data: a file whose bounds overlap the window counts even if its rows fall around it, so a table can be called
    active needlessly (its models then run, as they would without the plan) but never idle while it has such rows.
    """
    bounds = [_naive_utc(lower).isoformat(), _naive_utc(upper).isoformat()]
    active = set()
    for table, column in columns.items():
        try:
            loaded = catalog.load_table(f"{BRONZE_SCHEMA}.{table}")
        except NoSuchTableError:
            continue  # not created yet: no rows
        row_filter = And(GreaterThanOrEqual(column, bounds[0]), LessThanOrEqual(column, bounds[1]))
        if next(iter(loaded.scan(row_filter=row_filter).plan_files()), None) is not None:
            active.add(table)
    return active


def _naive_utc(moment: datetime) -> datetime:
    """Bronze arrival hours are UTC timestamps without a zone; Dagster's partition windows carry one."""
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def built_relations(duckdb_path: Path) -> set[str]:
    """``schema.name`` of every table and view in the DuckDB file (none if it does not exist yet)."""
    if not duckdb_path.exists():
        return set()
    con = duckdb.connect()
    try:
        con.execute(f"attach '{duckdb_path}' as built (read_only)")
        return {
            f"{schema}.{name}"
            for schema, name in con.execute(
                "select table_schema, table_name from information_schema.tables where table_catalog = 'built'"
            ).fetchall()
        }
    finally:
        con.close()


def probe_window(
    settings: Settings, manifest: Mapping[str, Any], first_hour: datetime, last_hour: datetime
) -> tuple[set[str], set[str]]:
    """(bronze tables with rows arriving in the window plus the lookback, relations built in the DuckDB file).

    Metadata only: the plan runs before every hourly dbt invocation, and scanning the tables with DuckDB cost ~0.3 s
    (loading the Iceberg extensions into a fresh database, then a read per table) against ~0.1 s for this.
    """
    lower = first_hour - timedelta(hours=LOOKBACK_HOURS)
    active = active_tables(load_catalog(settings), probed_sources(manifest), lower, last_hour)
    return active, built_relations(Path(settings.duckdb_path))


def plan_window(
    settings: Settings, manifest: Mapping[str, Any], first_hour: datetime, last_hour: datetime
) -> WindowPlan:
    """What a run of arrival hours ``first_hour`` .. ``last_hour`` can skip."""
    active, built = probe_window(settings, manifest, first_hour, last_hour)
    return WindowPlan(idle=tuple(idle_models(manifest, active, built)), active_sources=frozenset(active))
