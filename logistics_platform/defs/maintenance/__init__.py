"""Dagster definitions for the maintenance domain: the nightly ``lakehouse_maintenance`` job and table health, and
the hourly prune of superseded runs: Dagster's own storage bounded (docs/operations.md, "Dagster's own storage")."""

from collections.abc import Hashable
from datetime import UTC, datetime, timedelta
from logging import Logger
from pathlib import Path

import dagster as dg

from logistics_platform.defs.constants import MAINTENANCE_JOB, MAINTENANCE_WRITER_TAGS
from logistics_platform.defs.maintenance.assets import MAINTENANCE_KEY, iceberg_table_health, iceberg_tables
from logistics_platform.defs.operate.common import schedule_status
from logistics_platform.lib.maintenance.run_prune import remove_sqlite_file, superseded
from logistics_platform.lib.operate.transform_pending import builders
from logistics_platform.settings import Settings

KINDS = {dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.ASSET_CHECK_EVALUATION}


def prune_superseded_runs(instance: dg.DagsterInstance, age: timedelta, log: Logger | None = None) -> tuple[int, int]:
    """Delete the successful runs ended ``age`` ago or earlier that hold no latest event; (pruned, such runs)."""
    done = instance.get_run_records(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
    cutoff = (datetime.now(UTC) - age).timestamp()
    events: dict[str, set[Hashable]] = {r.dagster_run.run_id: set() for r in done if (r.end_time or cutoff) < cutoff}
    # The transform sensor rebuilds a lost cursor from these runs' tags: each hour keeps the run it reads.
    latest: dict[Hashable, str] = dict(builders({r.dagster_run.run_id: r.dagster_run.tags for r in done}).items())
    for hour, run_id in latest.items():
        events.get(run_id, set()).add(hour)
    for run_id, kinds in events.items():
        for event in (e.dagster_event for e in instance.all_logs(run_id, of_type=KINDS) if e.dagster_event):
            kinds.add(getattr(event.event_specific_data, "asset_check_key", None) or (event.asset_key, event.partition))
    for kind in set().union(*events.values()) - latest.keys():
        if isinstance(kind, dg.AssetCheckKey):  # its newest execution with an evaluation (a failed run plans some)
            executions = instance.event_log_storage.get_asset_check_execution_history(kind, limit=50)
            holder = next((e.run_id for e in executions if e.status.value in ("SUCCEEDED", "FAILED")), None)
        else:  # an asset partition (None: unpartitioned): its latest materialization
            found = dg.AssetRecordsFilter(kind[0], asset_partitions=[kind[1]] if kind[1] else None)  # type: ignore[index]
            holder = next((r.run_id for r in instance.fetch_materializations(found, limit=1).records), None)
        latest |= {kind: holder} if holder else {}
    pruned = superseded(events, latest)
    # On SQLite each run has its own event file, which delete_run empties but keeps at its size (SQLite never shrinks a
    # file): the storage's own path for it (as Dagster's wipe() does) is removed too. PostgreSQL has no such files.
    storage = instance.event_log_storage
    shard_path = getattr(storage, "path_for_shard", None) if storage.is_run_sharded else None
    for n, run_id in enumerate(pruned, 1):
        instance.delete_run(run_id)
        instance.compute_log_manager.delete_logs(prefix=[run_id])
        if shard_path is not None:
            remove_sqlite_file(Path(shard_path(run_id)))
        if log and n % 100 == 0:
            log.info(f"pruned {n} of {len(pruned)} superseded runs")
    return len(pruned), len(events)


def build_prune(settings: Settings) -> dg.Definitions:
    """The prune job and its hourly schedule; none when DAGSTER_PRUNE_SUPERSEDED_AFTER_MINUTES is 0."""
    if not (minutes := settings.dagster_prune_superseded_after_minutes):
        return dg.Definitions()

    @dg.op(out=dg.Out(dg.Nothing))
    def prune_superseded(context: dg.OpExecutionContext) -> dg.Output[None]:
        """Delete the superseded runs (events and compute logs) of Dagster's storage."""
        pruned, finished = prune_superseded_runs(context.instance, timedelta(minutes=minutes), context.log)
        context.log.info(f"pruned {pruned} superseded runs of {finished} finished, kept {finished - pruned}")
        return dg.Output(None, metadata={"pruned": pruned, "finished": finished, "kept": finished - pruned})

    @dg.job(name="prune_superseded_runs", description="Deletes the successful runs that hold no latest event.")
    def prune_job() -> None:
        prune_superseded()

    # Running by default, like the nightly maintenance: storage that someone must remember to bound is not bounded.
    schedule = dg.ScheduleDefinition(
        name="hourly_run_prune", job=prune_job, cron_schedule="25 * * * *", default_status=schedule_status(settings)
    )
    return dg.Definitions(jobs=[prune_job], schedules=[schedule])


def build_defs(settings: Settings) -> dg.Definitions:
    """The maintenance asset and health checks, their nightly job and its schedule; the run prune and its schedule."""
    job = dg.define_asset_job(
        MAINTENANCE_JOB,
        selection=dg.AssetSelection.assets(MAINTENANCE_KEY) | dg.AssetSelection.checks(iceberg_table_health),
        description="Compaction, manifest consolidation, daily tags, snapshot expiry and orphan removal "
        "on every Iceberg table, then table health checks.",
        tags=MAINTENANCE_WRITER_TAGS,
    )
    # Running by default: the job is safe by construction (age windows, validated commits), and a maintenance
    # schedule that someone must remember to switch on is the one that silently lets storage and scan times grow.
    schedule = dg.ScheduleDefinition(
        name="nightly_maintenance_schedule",
        job_name=MAINTENANCE_JOB,
        cron_schedule="0 2 * * *",
        execution_timezone="UTC",
        default_status=schedule_status(settings),
        tags=MAINTENANCE_WRITER_TAGS,
        description="Nightly Iceberg maintenance at 02:00 UTC (after the day's last hourly ingest has landed).",
    )
    tables = dg.Definitions(
        assets=[iceberg_tables], asset_checks=[iceberg_table_health], jobs=[job], schedules=[schedule]
    )
    return dg.Definitions.merge(tables, build_prune(settings))
