"""Two days, hour by hour, driven only by the platform's own sensors and schedules.

Each simulated hour, the files the generator wrote "by then" (file mtime = upload time, so delayed uploads
show up hours after their folder's hour) appear in the landing zone; the landing sensor and the hourly
schedule are evaluated and the runs they request are executed; the nightly maintenance job runs at 02:00
and the dbt sensor ticks after it at 03:00 (one dbt run a day keeps this test inside its time budget; in
production the sensor ticks every 5 minutes). On the first night the Iceberg catalog database is locked
by another process while maintenance runs: the run fails, an alert names it, and the following runs
(ingest the same night, maintenance the next night) succeed without anyone stepping in. At the end every
landed hour is accounted for in bronze (verify), the invariants of docs/contract/marts.md hold, and every mart equals a
full refresh of the dbt project over the same bronze, built into a fresh DuckDB file.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from logistics_platform.definitions import build_definitions
from logistics_platform.defs.constants import MAINTENANCE_JOB, MARTS
from logistics_platform.defs.operate.transform_sensor import pending_transform_hours
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.operate.alerts import read_log
from logistics_platform.lib.operate.landing_watch import scan_landing
from logistics_platform.lib.operate.progress import compare, read_ingest_log
from logistics_platform.lib.transform.operations import ALERTED_EPISODES, OFF_ROUTE_CHECK, OFF_ROUTE_MART
from logistics_platform.lib.transform.project import run_dbt
from logistics_platform.settings import Settings, local_settings

START = datetime(2026, 11, 1, tzinfo=UTC)
DAYS = 2
DBT_HOUR = 3  # the dbt sensor's tick of the day (after maintenance)
OFF_ROUTE_TABLES = (f"marts.{OFF_ROUTE_MART}", ALERTED_EPISODES)
FAIL_AT = START + timedelta(days=1, hours=2)  # maintenance of the first night


class Daemon:
    """Plays the Dagster daemon: evaluates sensors/schedules, drops repeated run keys, executes the runs."""

    def __init__(self, settings: Settings, instance: dg.DagsterInstance) -> None:
        self.settings = settings
        self.instance = instance
        self.defs = build_definitions(settings)
        self.repo = self.defs.get_repository_def()
        self.cursors: dict[str, str | None] = {}
        self.run_keys: set[tuple[str, str]] = set()
        self.results: list[tuple[str, str, dg.ExecuteInProcessResult]] = []

    def _execute(self, instigator: str, job_name: str, request: dg.RunRequest) -> dg.ExecuteInProcessResult | None:
        if request.run_key:
            if (instigator, request.run_key) in self.run_keys:
                return None
            self.run_keys.add((instigator, request.run_key))
        tags = {**(request.tags or {}), "dagster/run_key": request.run_key or "", "logistics/sim": instigator}
        job = self.defs.resolve_job_def(request.job_name or job_name)
        result = job.execute_in_process(
            instance=self.instance, partition_key=request.partition_key, tags=tags, raise_on_error=False
        )
        self.results.append(
            (instigator, request.partition_key or tags.get("dagster/asset_partition_range_start", ""), result)
        )
        if not result.success:
            self._alert(result)
        return result

    def _alert(self, result: dg.ExecuteInProcessResult) -> None:
        """What the daemon does for a failed run: evaluate the run-failure sensor on it."""
        run = self.instance.get_run_by_id(result.run_id)
        failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.RUN_FAILURE)
        ctx = dg.build_run_status_sensor_context(
            sensor_name="alert_on_run_failure",
            dagster_event=failure,
            dagster_instance=self.instance,
            dagster_run=run,
            repository_def=self.repo,
        )
        self.repo.get_sensor_def("alert_on_run_failure")(ctx.for_run_failure())

    def sensor(self, name: str) -> list[dg.ExecuteInProcessResult]:
        sensor = self.repo.get_sensor_def(name)
        ctx = dg.build_sensor_context(instance=self.instance, cursor=self.cursors.get(name), repository_def=self.repo)
        data = sensor.evaluate_tick(ctx)
        self.cursors[name] = data.cursor
        job = sensor.job_name if sensor.targets else ""  # run-status sensors target no job
        return [r for req in data.run_requests or [] if (r := self._execute(name, job, req))]

    def schedule(self, name: str, when: datetime) -> list[dg.ExecuteInProcessResult]:
        schedule = self.repo.get_schedule_def(name)
        ctx = dg.build_schedule_context(scheduled_execution_time=when, repository_def=self.repo)
        # A schedule context reaches its instance through an InstanceRef, which an in-memory instance has not:
        # hand it the daemon's instance directly (test plumbing only; the schedule code is unchanged).
        ctx._instance_ref, ctx._instance = True, self.instance  # type: ignore[assignment]
        data = schedule.evaluate_tick(ctx)
        return [r for req in data.run_requests or [] if (r := self._execute(name, schedule.job_name, req))]

    def job(self, name: str) -> dg.ExecuteInProcessResult:
        result = self.defs.resolve_job_def(name).execute_in_process(instance=self.instance, raise_on_error=False)
        self.results.append((name, "", result))
        if not result.success:
            self._alert(result)
        return result


class Uploader:
    """Moves generated files into the landing zone once their upload time (mtime) has passed."""

    def __init__(self, source: Path, landing: Path) -> None:
        self.landing = landing
        self.pending = sorted(
            (p.stat().st_mtime, p.relative_to(source), p) for p in (source / "topics").rglob("*.json*") if p.is_file()
        )

    def until(self, clock: datetime) -> int:
        moved = 0
        while self.pending and self.pending[0][0] < clock.timestamp():
            mtime, rel, src = self.pending.pop(0)
            dst = self.landing / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(dst.name + ".uploading")  # the sink's temp name: discovery skips it
            shutil.copyfile(src, tmp)
            os.utime(tmp, (mtime, mtime))
            os.replace(tmp, dst)
            moved += 1
        return moved


@contextmanager
def catalog_locked(settings: Settings) -> Iterator[None]:
    """Another client holding an exclusive lock on the SQLite catalog (an unavailable catalog database)."""
    con = sqlite3.connect(settings.catalog_uri.removeprefix("sqlite:///"), isolation_level=None, timeout=1)
    con.execute("begin exclusive")
    try:
        yield
    finally:
        con.execute("rollback")
        con.close()


@pytest.mark.slow
def test_two_days_hour_by_hour(tmp_path: Path) -> None:
    settings = local_settings(tmp_path / "state")
    source = tmp_path / "generated"
    summary = generate(
        source,
        GeneratorConfig(
            start=START.replace(tzinfo=None),
            hours=DAYS * 24,
            seed=23,
            tenants=3,
            couriers=8,
            orders_per_day=96,
            pings_per_day=192,
            delayed_files=2,
            delayed_file_hours=3,
            duplicate_rate=0.05,
            late_within_rate=0.05,
            late_beyond_rate=0.03,
        ),
    )
    assert summary["delayed_files"], "the generator must produce delayed uploads for this test to mean anything"
    uploader = Uploader(source, settings.landing_dir)
    # In-memory run and event storage: the SQLite storage of a real instance opens a connection per event, which
    # is most of an in-process run's time here; the sensors and schedules read the same APIs either way.
    with dg.DagsterInstance.ephemeral() as instance:
        daemon = Daemon(settings, instance)
        injected = None
        maintenance = []
        for i in range(DAYS * 24 + 3):  # three extra hours: the last delayed uploads and the last night
            clock = START + timedelta(hours=i + 1)
            uploader.until(clock)
            daemon.sensor("landing_sensor")
            daemon.schedule("hourly_ingest", clock + timedelta(minutes=5))
            night = clock >= START + timedelta(days=1)  # the nights after each day
            if night and clock.hour == 2:
                if clock == FAIL_AT:
                    with catalog_locked(settings):
                        injected = daemon.job(MAINTENANCE_JOB)
                else:
                    maintenance.append(daemon.job(MAINTENANCE_JOB))
            if night and clock.hour == DBT_HOUR:
                daemon.sensor("transform_after_ingest")
        assert not uploader.pending

        # The injected failure failed exactly one run, raised an alert naming it, and the next runs succeeded.
        assert injected is not None and not injected.success
        failed = [r for _, _, r in daemon.results if not r.success]
        assert [r.run_id for r in failed] == [injected.run_id]
        alerts = [a for a in read_log(settings.alerts_log) if a["check_name"] != OFF_ROUTE_CHECK]
        assert [a["run_id"] for a in alerts] == [injected.run_id]
        assert alerts[0]["assets"] == ["maintenance/iceberg_tables"]
        assert "locked" in alerts[0]["error"]
        # The generated detours: every off-route episode of the mart alerted once, over the day's transform runs.
        with closing(connect(settings.duckdb_path, read_only=True)) as con:
            episodes, alerted = (con.execute(f"select count(*) from {t}").fetchone()[0] for t in OFF_ROUTE_TABLES)
        assert episodes > 0 and alerted == episodes
        assert len(maintenance) == DAYS - 1 and all(r.success for r in maintenance)
        pending, _ = pending_transform_hours(instance, daemon.cursors.get("transform_after_ingest"))
        assert pending == {}
        assert daemon.sensor("landing_sensor") == []  # nothing new, nothing requested twice

        # Runs requested: every landed hour once, delayed uploads again, nothing twice for an unchanged hour.
        ingests = [(who, part) for who, part, r in daemon.results if r.dagster_run.job_name == "ingest_arrival_hours"]
        landed = set(scan_landing(settings.landing_dir, lookback_days=None))
        assert len(landed) > DAYS * 24 * 0.9  # (a quiet night hour may land nothing at this volume)
        assert {p for _, p in ingests} == landed
        assert len(ingests) <= len(landed) + 2 * len(summary["delayed_files"])

    # Bronze accounts for every landed line of every hour.
    reports = compare(
        scan_landing(settings.landing_dir, lookback_days=None),
        read_ingest_log(load_catalog(settings)),
        settings.landing_dir,
    )
    assert len(reports) == len(landed) and all(r.ok for r in reports), [r for r in reports if not r.ok]
    _assert_invariants(settings.duckdb_path)

    # Incremental (hour by hour, delayed files, re-runs, a failure) equals a full refresh of every model over the
    # same bronze, built into a fresh DuckDB file. (Bronze itself equals the landing zone: verify above; the
    # `rebuild` command that also re-ingests bronze is tested in test_operate_rebuild.py.)
    full = settings.with_overrides(duckdb_path=tmp_path / "full" / "analytics.duckdb")
    run_dbt(
        full,
        ["build", "--full-refresh", "--exclude", "resource_type:test", "resource_type:unit_test"],
        target_path=tmp_path / "full" / "target",
    )
    con = connect(settings.duckdb_path, read_only=True)
    try:
        con.execute(f"attach '{full.duckdb_path}' as full_rebuild (read_only)")
        for mart in MARTS:
            live_n = con.execute(f"select count(*) from marts.{mart}").fetchone()[0]
            diff = con.execute(
                f"select count(*) from ((select * from marts.{mart} except all select * from full_rebuild.marts.{mart})"
                f" union all (select * from full_rebuild.marts.{mart} except all select * from marts.{mart}))"
            ).fetchone()[0]
            assert diff == 0, f"marts.{mart}: {diff} rows differ from the full rebuild ({live_n} live rows)"
    finally:
        con.close()


def _assert_invariants(path: Path) -> None:
    con = connect(path, read_only=True)
    q = lambda sql: con.execute(sql).fetchone()[0]  # noqa: E731
    try:
        assert q("select count(*) from marts.fct_orders") > 0
        assert q("select count(*) from marts.fct_deliveries") > 0
        # 2. no event identity twice in staging, no key twice in a current-state mart
        for stg in ("stg_orders", "stg_payments", "stg_tenants", "stg_couriers"):
            assert q(f"select count(*) - count(distinct _event_id) from staging.{stg}") == 0, stg
        assert q("select count(*) - count(distinct order_id) from marts.fct_orders") == 0
        assert q("select count(*) - count(distinct courier_id) from marts.dim_courier") == 0
        # 4. revenue reconciles exactly; every delivered order has a tenant version valid at delivered_at
        assert (
            q("""select count(*) from marts.fct_daily_revenue
                    where gross_revenue <> tenant_revenue + courier_revenue + platform_revenue""")
            == 0
        )
        assert (
            q("""select count(*) from marts.fct_deliveries d where not exists (
                    select 1 from marts.dim_tenant t where t.tenant_id = d.tenant_id and t.valid_from <= d.delivered_at
                    and (t.valid_to is null or d.delivered_at < t.valid_to))""")
            == 0
        )
        # SCD2 versions never overlap and leave no gap
        assert (
            q("""select count(*) from (select valid_to, lead(valid_from) over (partition by tenant_id
                    order by valid_from) as next_from from marts.dim_tenant) where next_from is not null
                    and valid_to <> next_from""")
            == 0
        )
    finally:
        con.close()
