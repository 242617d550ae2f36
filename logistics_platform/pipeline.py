"""The main job behind `logistics-platform run`: every landed hour through Dagster, then everything downstream.

Runs go through Dagster jobs on the configured instance (``$DAGSTER_HOME``), so they show in the UI's run
history exactly like runs launched there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import dagster as dg

# Not re-exported by `dagster`; catching DagsterError instead would hide a broken dagster.yaml.
from dagster._core.errors import DagsterHomeNotSetError

from logistics_platform.defs.operate import INGEST_JOB, TRANSFORM_GROUPS, TRANSFORM_JOB
from logistics_platform.defs.partitions import HOUR_KEY_FORMAT, arrival_hour_partitions
from logistics_platform.settings import Settings

# The hourly jobs are the operate domain's (the same the sensors, schedules and UI backfills launch); only the
# assets outside any arrival-hour partitioning get an ad-hoc job here.
UNPARTITIONED_JOB = "run_downstream_unpartitioned"
# Groups that `run` does not execute: maintenance is nightly, landing assets are external.
EXCLUDED_GROUPS = ("maintenance", "landing")


# Step-level events go to the run's event log (the UI shows them); the terminal gets warnings and our progress.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


class PipelineError(RuntimeError):
    """The run cannot start; the message says what is wrong and what to do."""


@dataclass
class RunRecord:
    job: str
    partition: str
    run_id: str
    success: bool


@dataclass
class Summary:
    partitions: list[str]
    runs: list[RunRecord] = field(default_factory=list)
    bronze: dict[str, int] = field(default_factory=dict)
    marts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.success for r in self.runs)

    def render(self) -> str:
        lines = [f"arrival hours: {len(self.partitions)}"]
        if self.partitions:
            lines[0] += f" ({self.partitions[0]} .. {self.partitions[-1]})"
        failed = [r for r in self.runs if not r.success]
        lines.append(f"runs: {len(self.runs)} ({len(failed)} failed)")
        lines += [f"  FAILED {r.job} [{r.partition}] run {r.run_id}" for r in failed]
        width = max([len(n) for n in (*self.bronze, *self.marts)] + [10])
        lines.append("")
        lines.append(f"{'table'.ljust(width + 8)} {'rows':>12}")
        lines += [f"{('bronze.' + n).ljust(width + 8)} {c:>12,}" for n, c in self.bronze.items()]
        lines += [f"{('marts.' + n).ljust(width + 8)} {c:>12,}" for n, c in self.marts.items()]
        return "\n".join(lines)


def hour_key(hour: datetime) -> str:
    return hour.strftime(HOUR_KEY_FORMAT)


def _instance() -> dg.DagsterInstance:
    try:
        return dg.DagsterInstance.get()
    except DagsterHomeNotSetError:
        # Without DAGSTER_HOME (e.g. called from a test) the runs still execute, in a throwaway instance.
        return dg.DagsterInstance.ephemeral()


def resolve_partitions(settings: Settings, requested: Sequence[str] | None) -> list[str]:
    """The partition keys to ingest: the requested ones (validated), or every landed arrival hour in order."""
    from logistics_platform.lib.bronze.landing import list_arrival_hours

    partitions_def = arrival_hour_partitions(settings)
    if requested is None:
        if not settings.landing_dir.exists():
            raise PipelineError(
                f"landing zone {settings.landing_dir} does not exist: run `logistics-platform generate` "
                "or set LANDING_DIR"
            )
        requested = [hour_key(h) for h in list_arrival_hours(settings.landing_dir)]
        if not requested:
            raise PipelineError(f"no arrival hours under {settings.landing_dir}/topics: nothing to ingest")
    valid = set(partitions_def.get_partition_keys())
    bad = [k for k in requested if k not in valid]
    if bad:
        raise PipelineError(
            f"not arrival-hour partitions: {', '.join(bad[:5])}; keys look like 2026-11-01-13:00 and start at "
            f"PARTITIONS_START={settings.partitions_start}"
        )
    return list(requested)


def _jobs(defs: dg.Definitions) -> tuple[dg.Definitions, bool, bool]:
    """The definitions plus the ad-hoc job for unpartitioned downstream assets, and which jobs have assets."""
    graph = defs.resolve_asset_graph()
    excluded = set(EXCLUDED_GROUPS) | {"bronze"}
    partitioned: list[dg.AssetKey] = []
    unpartitioned: list[dg.AssetKey] = []
    for key in graph.materializable_asset_keys:
        node = graph.get(key)
        if node.group_name in excluded:
            continue
        (partitioned if node.partitions_def is not None else unpartitioned).append(key)
    stray = [k.to_user_string() for k in partitioned if graph.get(k).group_name not in TRANSFORM_GROUPS]
    if stray:  # the operate transform job selects by group: a partitioned asset elsewhere would be skipped
        raise PipelineError(
            f"partitioned assets outside the groups {', '.join(TRANSFORM_GROUPS)}: {', '.join(stray)}; "
            "put them in one of those groups or add their group to TRANSFORM_GROUPS in defs/operate"
        )
    jobs = [dg.define_asset_job(UNPARTITIONED_JOB, selection=dg.AssetSelection.assets(*unpartitioned))]
    return dg.Definitions.merge(defs, dg.Definitions(jobs=jobs)), bool(partitioned), bool(unpartitioned)


def run_pipeline(
    settings: Settings, partitions: Sequence[str] | None = None, log: Callable[[str], None] = lambda _m: None
) -> Summary:
    """Ingest ``partitions`` in order (default: all landed hours), then build downstream over their range."""
    from logistics_platform.definitions import build_definitions

    keys = resolve_partitions(settings, partitions)
    defs, has_partitioned, has_unpartitioned = _jobs(build_definitions(settings))
    instance = _instance()
    summary = Summary(partitions=keys)

    def execute(job_name: str, label: str, **kwargs: object) -> bool:
        job = defs.resolve_job_def(job_name)
        result = job.execute_in_process(
            run_config=QUIET,
            instance=instance,
            raise_on_error=False,
            **kwargs,  # type: ignore[arg-type]
        )
        summary.runs.append(RunRecord(job_name, label, result.run_id, result.success))
        return result.success

    for i, key in enumerate(keys, start=1):
        ok = execute(INGEST_JOB, key, partition_key=key)
        log(f"[{i}/{len(keys)}] ingest {key}: {'ok' if ok else 'FAILED'}")
    if has_partitioned:
        ordered = sorted(keys)
        tags = {
            "dagster/asset_partition_range_start": ordered[0],
            "dagster/asset_partition_range_end": ordered[-1],
        }
        ok = execute(TRANSFORM_JOB, f"{ordered[0]}..{ordered[-1]}", tags=tags)
        log(f"transform {ordered[0]} .. {ordered[-1]}: {'ok' if ok else 'FAILED'}")
    if has_unpartitioned:
        ok = execute(UNPARTITIONED_JOB, "-")
        log(f"downstream (unpartitioned): {'ok' if ok else 'FAILED'}")
    summary.bronze, summary.marts = table_counts(settings)
    return summary


def table_counts(settings: Settings) -> tuple[dict[str, int], dict[str, int]]:
    """Row counts of the bronze Iceberg tables and of the DuckDB marts, for the summary."""
    from logistics_platform.lib.connections import connect, load_catalog

    catalog = load_catalog(settings)
    bronze = {}
    for _ns, name in sorted(catalog.list_tables("bronze")):
        bronze[name] = catalog.load_table(f"bronze.{name}").scan().count()
    marts: dict[str, int] = {}
    if settings.duckdb_path.exists():
        con = connect(settings.duckdb_path, read_only=True)
        try:
            names = con.execute(
                "select table_name from information_schema.tables where table_schema = 'marts' order by 1"
            ).fetchall()
            for (name,) in names:
                marts[name] = con.execute(f'select count(*) from marts."{name}"').fetchone()[0]  # type: ignore[index]
        finally:
            con.close()
    return bronze, marts
