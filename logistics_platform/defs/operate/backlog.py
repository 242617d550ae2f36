"""The backlog report: landed work not yet ingested and how far the marts lag behind bronze, hourly."""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from logistics_platform.defs.constants import OWNERS, TRANSFORM_JOB
from logistics_platform.defs.operate.common import schedule_status
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.lib.transform.arrival_window import run_window
from logistics_platform.settings import Settings

BACKLOG_KEY = dg.AssetKey(["operations", "pipeline_backlog"])
BACKLOG_CHECK = "backlog_within_limit"
# More pending hours (or marts hours behind bronze) than this warns: the schedule re-ingests the last two hourly.
BACKLOG_WARN_HOURS = 3
# The newest hour built is read from this many of the latest successful transform runs (one of them built it).
RECENT_TRANSFORM_RUNS = 24


def _latest_built_hour(instance: dg.DagsterInstance) -> str | None:
    """Newest arrival hour a recent successful transform run built, from its window tags (dbt partitions are days)."""
    done = dg.RunsFilter(job_name=TRANSFORM_JOB, statuses=[dg.DagsterRunStatus.SUCCESS])
    runs = instance.get_runs(done, limit=RECENT_TRANSFORM_RUNS)
    # A live run (tagged logistics/live) builds the two alerting marts, not the layer.
    ends = [w.last_key for run in runs if "logistics/live" not in run.tags and (w := run_window(run.tags)) is not None]
    return max(ends) if ends else None


def build_backlog(settings: Settings) -> dg.Definitions:
    """The backlog asset with its warning check, its job and its hourly schedule."""
    check_spec = dg.AssetCheckSpec(
        BACKLOG_CHECK,
        asset=BACKLOG_KEY,
        description=(
            f"Warns when more than {BACKLOG_WARN_HOURS} landed hours wait for ingest or the marts are more than "
            f"{BACKLOG_WARN_HOURS} hours behind bronze."
        ),
    )

    @dg.asset(
        key=BACKLOG_KEY,
        group_name="operations",
        kinds={"python"},
        owners=OWNERS,
        check_specs=[check_spec],
        description="Landed hours/files/lines not yet ingested and how far the marts lag behind bronze.",
    )
    def pipeline_backlog(context: dg.AssetExecutionContext) -> Iterator[Any]:
        from logistics_platform.lib.connections import catalog_of
        from logistics_platform.lib.operate import progress as plan

        catalog = catalog_of(settings)  # the recent hours and the never-logged ones: not growing with the history
        folders = plan.folders_to_look_at(catalog, settings.landing_dir)
        hours = None if folders is None else sorted({hour_key(h) for _, h in folders})
        scan = scan_landing(settings.landing_dir, lookback_days=None, hours=hours)
        state = plan.backlog(scan, plan.read_ingest_log(catalog, hours), settings.landing_dir)
        marts_hour = _latest_built_hour(context.instance)
        marts_lag = plan.hours_between(marts_hour, state.latest_ingested)
        metadata: dict[str, Any] = {
            **state.as_metadata(),
            "marts_latest_hour": marts_hour or "-",
            "marts_lag_hours": marts_lag,
        }
        context.log.info(f"backlog: {metadata}")
        ok = len(state.hours_pending) <= BACKLOG_WARN_HOURS and marts_lag <= BACKLOG_WARN_HOURS
        yield dg.Output(None, metadata=metadata)
        yield dg.AssetCheckResult(
            check_name=BACKLOG_CHECK,
            passed=ok,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"hours_pending": len(state.hours_pending), "marts_lag_hours": marts_lag},
            description=None
            if ok
            else (
                f"{len(state.hours_pending)} hours pending ingest (oldest {state.hours_pending[:1]}), marts "
                f"{marts_lag:.0f}h behind: check that landing_sensor/hourly_ingest/transform_after_ingest run, "
                "and `logistics-platform verify`"
            ),
        )

    schedule = dg.ScheduleDefinition(
        name="backlog_report",
        job=dg.define_asset_job("report_backlog", selection=dg.AssetSelection.assets(BACKLOG_KEY)),
        cron_schedule="30 * * * *",
        execution_timezone="UTC",
        default_status=schedule_status(settings),
        description="Hourly at :30 (after the :05 ingest): ingest backlog and marts lag (metadata + warning check).",
    )
    return dg.Definitions(assets=[pipeline_backlog], schedules=[schedule])
