"""Rebuild bronze and the marts from the landing zone into fresh tables aside, validate, then swap them in at once.

A failure before the swap leaves the live platform untouched; the design is in ``docs/internals/operate.md``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pyiceberg.catalog.sql import IcebergTables
from sqlalchemy.orm import Session

from logistics_platform.lib.bronze.incidents import carry_accepted
from logistics_platform.lib.bronze.ingest import consecutive_ranges, ingest_hours
from logistics_platform.lib.bronze.landing import list_arrival_hours
from logistics_platform.lib.connections import catalog_of, connect
from logistics_platform.lib.maintenance import list_iceberg_tables
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.operate.progress import compare, read_ingest_log
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.settings import Settings

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

REBUILD_DIR = "_rebuild"


class RebuildError(RuntimeError):
    """The rebuild failed or did not validate; the live platform was not changed."""


@dataclass
class RebuildResult:
    """What a rebuild that validated did (a failure raises :class:`RebuildError` instead)."""

    stamp: str
    staging_root: Path
    partitions: list[str] = field(default_factory=list)
    swapped: list[str] = field(default_factory=list)


# How to build the dbt layer: ``build(first, last, tags)`` builds hours first..last in one run, True if ok.
ModelBuild = Callable[[str, str, Mapping[str, str]], bool]
# The dbt layer of the code location built on these (staged) settings, None without dbt models; the CLI hands it in.
ModelsFor = Callable[[Settings], ModelBuild | None]


def staging_settings(settings: Settings, stamp: str) -> tuple[Settings, Path]:
    """Settings that put every table the rebuild writes under a fresh staging location."""
    root = settings.duckdb_path.parent / REBUILD_DIR / stamp
    staged = settings.with_overrides(
        catalog_uri=f"sqlite:///{root / 'catalog.db'}",
        warehouse=f"{settings.warehouse.rstrip('/')}/{REBUILD_DIR}/{stamp}",
        duckdb_path=root / settings.duckdb_path.name,
        alerts_log=root / "alerts.jsonl",
        automation_running=False,
    )
    return staged, root


def copy_ops_state(live_duckdb: Path, staged_duckdb: Path) -> list[str]:
    """Copy the DuckDB ``ops`` schema (operator decisions, not derived data) into the staged database."""
    if not live_duckdb.exists():
        return []
    with connect(staged_duckdb) as con:
        con.execute(f"attach '{live_duckdb}' as live (read_only)")
        query = "select table_name from duckdb_tables() where database_name = 'live' and schema_name = 'ops'"
        tables = [r[0] for r in con.execute(query).fetchall()]
        if tables:
            con.execute("create schema if not exists ops")
        for name in tables:
            con.execute(f'create or replace table ops."{name}" as select * from live.ops."{name}"')
        con.execute("detach live")
    return tables


def build(staged: Settings, result: RebuildResult, models: ModelsFor, log: Callable[[str], None]) -> None:
    """Ingest every landed hour (in ranges of consecutive hours) and build every model into the staged location."""
    hours = [h for h in list_arrival_hours(staged.landing_dir) if h >= staged.partitions_start_datetime]
    keys = result.partitions = [hour_key(h) for h in hours]
    if not keys:
        raise RebuildError(f"no arrival hours under {staged.landing_dir}/topics: nothing to rebuild from")
    model_build = models(staged)  # a code location that does not load fails before anything is written
    done = 0
    for run in consecutive_ranges(hours, staged.ingest_max_hours_per_run):
        first, last = hour_key(run[0]), hour_key(run[-1])
        label = first if len(run) == 1 else f"{first}..{last}"
        try:
            ingest_hours(staged, run, run_id=f"rebuild-{result.stamp}", replace=True)
        except Exception as exc:
            raise RebuildError(f"ingest of {label} failed in the staging area ({exc}); live tables untouched") from exc
        done += len(run)
        log(f"[{done}/{len(keys)}] ingested up to {last}")
    if model_build is not None:
        ok = model_build(keys[0], keys[-1], {"logistics/rebuild": result.stamp})
        log(f"dbt build {keys[0]} .. {keys[-1]}: {'ok' if ok else 'FAILED'}")
        if not ok:
            raise RebuildError("dbt build failed in the staging area; live tables untouched")


def validate(staged: Settings, expected_marts: tuple[str, ...]) -> list[str]:
    """What is wrong with the staged build (empty = safe to swap)."""
    scan = scan_landing(staged.landing_dir, lookback_days=None)
    catalog = catalog_of(staged)
    problems: list[str] = []
    for r in compare(scan, read_ingest_log(catalog), staged.landing_dir, now=datetime.now(UTC)):
        if not r.ok and r.hour >= staged.partitions_start:
            problems.append(f"{r.hour}: {r.status} {r.stale or ''}".strip())
    if expected_marts and not staged.duckdb_path.exists():
        problems.append(f"{staged.duckdb_path} was not built")
    elif expected_marts:
        with connect(staged.duckdb_path, read_only=True, settings=staged) as con:
            sql = "select table_name from information_schema.tables where table_schema = 'marts'"
            have = {r[0] for r in con.execute(sql).fetchall()}
        problems += [f"mart marts.{m} missing from the staged DuckDB" for m in expected_marts if m not in have]
    if not any(t.startswith("bronze.") for t in list_iceberg_tables(catalog)):
        problems.append("no bronze table in the staged catalog")
    return problems


def repoint(catalog: Catalog, locations: Mapping[str, str | None], add: bool = True) -> dict[str, str | None]:
    """Point each table at its metadata location (None: drop its entry; ``add``: create a missing one) in one
    transaction; returns the previous locations."""
    previous: dict[str, str | None] = {}
    with Session(catalog.engine) as session, session.begin():
        for name, location in sorted(locations.items()):
            ns, table = name.split(".", 1)
            key = {"catalog_name": catalog.name, "table_namespace": ns, "table_name": table}
            row = session.get(IcebergTables, key)
            previous[name] = row.metadata_location if row else None
            if row is None and location is not None and add:
                session.add(IcebergTables(**key, metadata_location=location, previous_metadata_location=None))
            elif row is not None and location is None:
                session.delete(row)
            elif row is not None:
                row.previous_metadata_location, row.metadata_location = row.metadata_location, location
    return previous


def swap(live: Settings, staged: Settings, staging_root: Path) -> list[str]:
    """Point the live catalog at the staged tables (one transaction) and swap the DuckDB file (atomic rename)."""
    staged_catalog = catalog_of(staged)
    tables = list_iceberg_tables(staged_catalog)
    pointers: dict[str, str | None] = {name: staged_catalog.load_table(name).metadata_location for name in tables}
    previous = repoint(catalog_of(live), pointers)
    backup = None
    if staged.duckdb_path.exists():
        live.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
        if live.duckdb_path.exists():
            backup = staging_root / f"{live.duckdb_path.name}.before-swap"
            os.link(live.duckdb_path, backup)  # keeps the old file alive under a second name
        os.replace(staged.duckdb_path, live.duckdb_path)
    record = {
        "swapped_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "catalog": {"previous": previous, "current": pointers},
        "duckdb": {"live": str(live.duckdb_path), "backup": str(backup) if backup else None},
    }
    (staging_root / "swap.json").write_text(json.dumps(record, indent=2))
    return sorted(pointers)


def rollback(live: Settings, staging_root: Path) -> list[str]:
    """Undo a swap recorded in ``staging_root/swap.json``: old catalog pointers and the old DuckDB file back."""
    record = json.loads((staging_root / "swap.json").read_text())
    repoint(catalog_of(live), record["catalog"]["previous"], add=False)
    backup = record["duckdb"]["backup"]
    if backup and Path(backup).exists():
        os.replace(backup, record["duckdb"]["live"])
    return sorted(record["catalog"]["previous"])


def rebuild(
    settings: Settings,
    expected_marts: tuple[str, ...],
    models: ModelsFor,
    swap_in: bool = True,
    log: Callable[[str], None] = lambda _m: None,
    stamp: str | None = None,
) -> RebuildResult:
    """Build aside, validate, and (when ``swap_in``) swap in. Raises :class:`RebuildError` before any swap."""
    stamp = stamp or datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    staged, root = staging_settings(settings, stamp)
    if root.exists():
        raise RebuildError(f"{root} already exists: pick another stamp or remove it")
    root.mkdir(parents=True)
    result = RebuildResult(stamp=stamp, staging_root=root)
    log(f"rebuilding into {root} (warehouse {staged.warehouse})")
    if copied := copy_ops_state(settings.duckdb_path, staged.duckdb_path):
        log(f"copied operator state: ops.{', ops.'.join(copied)}")
    carry_accepted(catalog_of(settings), catalog_of(staged))  # operator decisions too, which the ingest reads
    build(staged, result, models, log)
    problems = validate(staged, expected_marts)
    if problems:
        raise RebuildError("staged build did not validate; live tables untouched:\n  " + "\n  ".join(problems))
    if swap_in:
        result.swapped = swap(settings, staged, root)
        log(f"swapped in {len(result.swapped)} tables and {settings.duckdb_path.name}; undo record {root}/swap.json")
    return result


def discard(staging_root: Path) -> None:
    """Remove a staging directory that was not swapped in (its files are referenced by nothing)."""
    if (staging_root / "swap.json").exists():
        raise RebuildError(f"{staging_root} was swapped in: its files are the live tables; do not delete it")
    shutil.rmtree(staging_root)
