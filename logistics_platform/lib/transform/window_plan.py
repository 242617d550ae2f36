"""Which dbt models an arrival-hour window leaves unchanged, so that the run can skip them.

Every incremental model recomputes what the bronze rows of its window (plus the lookback) touch. A model whose
bronze sources have no row in that window would run to change nothing: tenants and couriers change in a few hours
of a month, and their eight models are eight of the thirty-four nodes of an hourly dbt run.
Skipping is safe only for models that already exist and read nothing but bronze (the operators' fold table and the
seeds make a model always run), and never on a full refresh. An affected-set model (the keys a window changed) is
skipped only with all its readers: it is the last run's set, not a state.

Seeds and views hold nothing a window changes: a seed is its CSV file, a view its query. Rebuilding them every hour
only repeats the last build, so they are skipped while the relation carries the
fingerprint of what the project would build now (:func:`static_fingerprint`, written as the relation's comment after
the build that created it). An edited file, config, macro or dbt version changes the fingerprint, and the next run
rebuilds them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.expressions import And, GreaterThanOrEqual, LessThanOrEqual

from logistics_platform.lib.bronze.views import BRONZE_SCHEMA
from logistics_platform.lib.connections import catalog_of
from logistics_platform.settings import Settings

# Default of the dbt var lookback_hours (dbt_project.yml; a test keeps the two equal).
LOOKBACK_HOURS = 1
# dbt tag of the affected-set models (models/intermediate/affected/): tables of the keys and windows one run's arrival
# window changed, rebuilt whenever a model reading them runs.
AFFECTED_TAG = "affected"
# Prefix of the relation comments that record a seed's or view's build (see static_fingerprint).
FINGERPRINT_PREFIX = "dbt-build:"


@dataclass(frozen=True)
class WindowPlan:
    """The models a window's run skips, and why."""

    idle: tuple[str, ...]  # node names: unchanged seeds and views, then models without rows in the window
    active_sources: frozenset[str]  # bronze tables with rows in the window (lookback included)
    unchanged: tuple[str, ...] = ()  # the seeds and views among ``idle``

    def exclude_args(self) -> list[str]:
        """dbt flags that leave the idle models (and the tests on them alone) out of the run.

        One space-separated value: dagster-dbt's ``DbtCliResource.cli`` takes one value per ``--exclude`` flag.
        """
        return ["--exclude", " ".join(self.idle)] if self.idle else []


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
        relation = relation_name(node)
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
    kept = window_sets_read(manifest, {name for _, name in idle})
    return [name for _, name in sorted(idle) if name not in kept]


def window_sets_read(manifest: Mapping[str, Any], idle: set[str]) -> set[str]:
    """The affected-set models (tag ``affected``) among ``idle`` that a model outside ``idle`` reads.

    Such a set is a table of the last run's window, not a state that a window without rows leaves as it is: while
    any reader runs, the set is rebuilt for this window (empty when its sources have no rows in it). A set kept so
    must have no idle reader (Dagster wants an idle model's inputs reported first): a set is read by models of its
    own sources only, or by another set.
    """
    running = {n["name"] for n in manifest["nodes"].values() if n.get("resource_type") == "model"} - idle
    return window_sets_for(manifest, running) & idle


def window_sets_for(manifest: Mapping[str, Any], models: set[str]) -> set[str]:
    """The affected-set models that ``models`` read, directly or through other sets."""
    nodes = manifest["nodes"]
    found: set[str] = set()
    readers = {uid for uid, n in nodes.items() if n.get("resource_type") == "model" and n["name"] in models}
    while readers:
        parents = {p for uid in readers for p in nodes[uid].get("depends_on", {}).get("nodes", []) if p in nodes}
        readers = {
            uid for uid in parents if AFFECTED_TAG in nodes[uid].get("tags", []) and nodes[uid]["name"] not in found
        }
        found |= {nodes[uid]["name"] for uid in readers}
    return found


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


def relation_name(node: Mapping[str, Any]) -> str:
    """``schema.name`` of a node's relation in DuckDB, lower case."""
    return f"{node['schema']}.{node.get('alias') or node['name']}".lower()


def built_relations(duckdb_path: Path) -> dict[str, str | None]:
    """``schema.name`` -> comment of every table and view in the DuckDB file (none if it does not exist yet)."""
    if not duckdb_path.exists():
        return {}
    con = duckdb.connect()
    try:
        con.execute(f"attach '{duckdb_path}' as built (read_only)")
        rows = con.execute(
            "select schema_name, table_name, comment from duckdb_tables() where database_name = 'built' "
            "union all select schema_name, view_name, comment from duckdb_views() "
            "where database_name = 'built' and not internal"
        ).fetchall()
        return {f"{schema}.{name}".lower(): comment for schema, name, comment in rows}
    finally:
        con.close()


def _static(node: Mapping[str, Any]) -> bool:
    return node.get("resource_type") == "seed" or (
        node.get("resource_type") == "model" and node.get("config", {}).get("materialized") == "view"
    )


def static_fingerprint(manifest: Mapping[str, Any], node: Mapping[str, Any]) -> str:
    """What a seed's or view's build is made of: its file, config and SQL, what it reads, its macros, dbt's version."""
    depends = node.get("depends_on", {})
    reads = [
        (manifest["sources"].get(uid) or manifest["nodes"].get(uid) or {}).get("relation_name") or uid
        for uid in depends.get("nodes", [])
    ]
    macros = [manifest.get("macros", {}).get(uid, {}).get("macro_sql", uid) for uid in depends.get("macros", [])]
    payload = {
        "dbt": manifest.get("metadata", {}).get("dbt_version"),
        "adapter": manifest.get("metadata", {}).get("adapter_type"),
        "checksum": node.get("checksum"),
        "config": node.get("config"),
        "sql": node.get("raw_code"),
        "reads": sorted(reads),
        "macros": sorted(macros),
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return FINGERPRINT_PREFIX + digest[:32]


def unchanged_static_nodes(manifest: Mapping[str, Any], built: Mapping[str, str | None]) -> list[str]:
    """Seeds and views whose relation records a build of exactly what the project would build now."""
    return [
        node["name"]
        for node in manifest["nodes"].values()
        if _static(node) and built.get(relation_name(node)) == static_fingerprint(manifest, node)
    ]


def record_static_builds(
    duckdb_path: Path, manifest: Mapping[str, Any], results: Iterable[Mapping[str, Any]]
) -> list[str]:
    """Write the fingerprint of each seed and view that ``results`` built successfully as its relation's comment."""
    built = {r["unique_id"] for r in results if r.get("status") == "success"}
    nodes = [
        manifest["nodes"][uid] for uid in sorted(built) if uid in manifest["nodes"] and _static(manifest["nodes"][uid])
    ]
    if not nodes:
        return []
    con = duckdb.connect(str(duckdb_path))
    try:
        for node in nodes:
            kind = "view" if node["resource_type"] == "model" else "table"
            schema, name = relation_name(node).split(".", 1)
            con.execute(f'comment on {kind} "{schema}"."{name}" is \'{static_fingerprint(manifest, node)}\'')
    finally:
        con.close()
    return [node["name"] for node in nodes]


def probe_window(
    settings: Settings, manifest: Mapping[str, Any], first_hour: datetime, last_hour: datetime
) -> tuple[set[str], dict[str, str | None]]:
    """(bronze tables with rows arriving in the window plus the lookback, relations built in the DuckDB file).

    Metadata only: the plan runs before every hourly dbt invocation, and scanning the tables with DuckDB (loading the
    Iceberg extensions into a fresh database, then a read per table) costs more than planning the files.
    """
    lower = first_hour - timedelta(hours=LOOKBACK_HOURS)
    active = active_tables(catalog_of(settings), probed_sources(manifest), lower, last_hour)
    return active, built_relations(Path(settings.duckdb_path))


def plan_window(
    settings: Settings, manifest: Mapping[str, Any], first_hour: datetime, last_hour: datetime
) -> WindowPlan:
    """What a run of arrival hours ``first_hour`` .. ``last_hour`` can skip."""
    active, built = probe_window(settings, manifest, first_hour, last_hour)
    unchanged = unchanged_static_nodes(manifest, built)
    return WindowPlan(
        idle=(*unchanged, *idle_models(manifest, active, built)),
        active_sources=frozenset(active),
        unchanged=tuple(unchanged),
    )
