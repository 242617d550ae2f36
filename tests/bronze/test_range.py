"""Range ingest: many arrival hours in one run, one Iceberg commit per table, equal to hour-by-hour ingest."""

from __future__ import annotations

import json
import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from logistics_platform.defs.bronze.assets import build_bronze_assets
from logistics_platform.defs.bronze.checks import CHECK_ACCOUNTING
from logistics_platform.defs.bronze.keys import BRONZE_ASSET_KEYS, TOPIC_KEYS
from logistics_platform.defs.constants import INGEST_LOG_KEY
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.accounting import account_hours
from logistics_platform.lib.bronze.ingest import ingest_hour, ingest_hours
from logistics_platform.lib.bronze.landing import list_arrival_hours
from logistics_platform.lib.bronze.reports import PROP_FINGERPRINT, PROP_PARTITION_KEY
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import cdc, dump, order, write_file

START = datetime(2026, 11, 1, 20)
HOURS = 8  # crosses a day boundary: the range spans two Iceberg day partitions
TABLES = [*bs.TOPICS, bs.QUARANTINE_TABLE, bs.INGEST_LOG_TABLE]


class Crash(RuntimeError):
    pass


def _generate(landing: Path) -> None:
    generate(
        landing,
        GeneratorConfig(
            start=START,
            hours=HOURS,
            seed=5,
            orders_per_day=900,
            pings_per_day=3000,
            malformed_json_rate=0.01,
            invalid_op_rate=0.01,
            missing_key_rate=0.01,
            invalid_value_rate=0.01,
            invalid_envelope_rate=0.01,
            delete_rate=0.05,
        ),
    )


def contents(settings: Settings) -> dict[str, pa.Table]:
    """Every bronze table's rows, sorted on all columns (row order is not part of the contract)."""
    catalog = load_catalog(settings)
    out = {}
    for name in TABLES:
        tbl = catalog.load_table(f"{bs.NAMESPACE}.{name}").scan().to_arrow()
        out[name] = tbl.sort_by([(c, "ascending") for c in tbl.column_names])
    return out


def snapshots(settings: Settings) -> dict[str, int]:
    catalog = load_catalog(settings)
    return {name: len(catalog.load_table(f"{bs.NAMESPACE}.{name}").snapshots()) for name in TABLES}


def current(settings: Settings) -> dict[str, int]:
    catalog = load_catalog(settings)
    out = {}
    for name in TABLES:
        snap = catalog.load_table(f"{bs.NAMESPACE}.{name}").current_snapshot()
        assert snap is not None
        out[name] = snap.snapshot_id
    return out


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("range_landing") / "landing"
    _generate(root)
    return root


@pytest.fixture(scope="module")
def hour_by_hour(tmp_path_factory, landing) -> dict[str, pa.Table]:
    settings = local_settings(tmp_path_factory.mktemp("range_hourly"), landing_dir=landing)
    for hour in list_arrival_hours(landing):
        ingest_hour(settings, hour)
    return contents(settings)


def _range_world(tmp_path: Path, landing: Path) -> tuple[Settings, list[datetime]]:
    settings = local_settings(tmp_path, landing_dir=landing)
    hours = list_arrival_hours(landing)
    ingest_hours(settings, hours, run_id="range-1")
    return settings, hours


def test_range_equals_hour_by_hour_with_one_commit_per_table(tmp_path, landing, hour_by_hour):
    settings = local_settings(tmp_path, landing_dir=landing)
    hours = list_arrival_hours(landing)
    assert len(hours) >= HOURS
    shuffled = list(hours)
    random.Random(3).shuffle(shuffled)
    reports = ingest_hours(settings, shuffled, run_id="range-1")
    assert [r.arrival_hour for r in reports] == sorted(hours)

    got = contents(settings)
    for name in TABLES:
        assert got[name].num_rows > 0, name
        assert got[name].equals(hour_by_hour[name]), name
    # create + one replace per table for the whole range
    assert snapshots(settings) == {name: 1 for name in TABLES}

    catalog = load_catalog(settings)
    first, last = hour_key(hours[0]), hour_key(hours[-1])
    orders = catalog.load_table("bronze.orders").current_snapshot()
    props = orders.summary.additional_properties
    assert props[PROP_PARTITION_KEY] == f"{first}..{last}"
    assert json.loads(props[PROP_FINGERPRINT]) == {r.partition_key: r.topics["orders"].fingerprint for r in reports}
    log = got[bs.INGEST_LOG_TABLE].to_pylist()
    by_hour = {(r["topic"], r["arrival_hour"]): r["fingerprint"] for r in log}
    for r in reports:
        assert by_hour[("oltp.public.orders", r.arrival_hour)] == r.topics["orders"].fingerprint

    accounts = account_hours(settings, hours)
    assert set(accounts) == set(hours)
    assert all(a.balanced for per_table in accounts.values() for a in per_table.values())


def test_reingest_inside_a_range_changes_nothing_visible(tmp_path, landing, hour_by_hour):
    settings, hours = _range_world(tmp_path, landing)
    ingest_hour(settings, hours[3])  # one hour of the range-committed tables
    assert all(contents(settings)[n].equals(hour_by_hour[n]) for n in TABLES)
    ingest_hours(settings, hours[2:6])  # a sub-range across the day boundary
    assert all(contents(settings)[n].equals(hour_by_hour[n]) for n in TABLES)
    ingest_hours(settings, [hours[5], hours[0], hours[2]])  # hours with gaps, out of order
    got = contents(settings)
    assert all(got[n].equals(hour_by_hour[n]) for n in TABLES)


def test_crash_mid_range_leaves_the_tables_as_they_were(tmp_path, landing, hour_by_hour):
    own_landing = tmp_path / "landing"
    shutil.copytree(landing, own_landing)
    settings, hours = _range_world(tmp_path, own_landing)
    before = current(settings)
    # A re-delivered file in the middle of the range: the re-run would change orders of that hour.
    hour = hours[4]
    write_file(
        own_landing,
        "oltp.public.orders",
        hour,
        9,
        0,
        [dump(cdc("c", "orders", order(990_001, hour), lsn=990_010, ts=hour))],
    )

    def crash(identifier: str) -> None:
        if identifier == "bronze.orders":
            raise Crash("injected crash after every hour of the range was written")

    with pytest.raises(Crash):
        ingest_hours(settings, hours, before_commit=crash)
    after = current(settings)
    for name in ("orders", "payments", "tracking_pings", bs.QUARANTINE_TABLE, bs.INGEST_LOG_TABLE):
        assert after[name] == before[name], name
    assert all(contents(settings)[n].equals(hour_by_hour[n]) for n in TABLES)  # tenants, couriers: same rows

    reports = ingest_hours(settings, hours)
    got = contents(settings)
    assert got["orders"].num_rows == hour_by_hour["orders"].num_rows + 1
    assert 990_001 in set(got["orders"].column("order_id").to_pylist())
    assert reports[4].topics["orders"].rows == 1 + sum(
        1 for r in hour_by_hour["orders"].column("_arrival_hour").to_pylist() if r == hour
    )
    accounts = account_hours(settings, hours)
    assert all(a.balanced for per_table in accounts.values() for a in per_table.values())


def test_dagster_range_run_records_every_hour(tmp_path, landing, hour_by_hour):
    settings = local_settings(tmp_path, landing_dir=landing)
    hours = list_arrival_hours(landing)
    keys = [hour_key(h) for h in hours]
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize(
        [build_bronze_assets(settings)],
        instance=instance,
        tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
        resources=build_resources(settings),
    )
    assert result.success
    assert all(contents(settings)[n].equals(hour_by_hour[n]) for n in TABLES)
    for key in BRONZE_ASSET_KEYS:
        latest = instance.event_log_storage.get_latest_storage_id_by_partition(
            key, dg.DagsterEventType.ASSET_MATERIALIZATION
        )
        assert sorted(latest) == keys, key
    checks = {(c.asset_key, c.check_name): c for c in result.get_asset_check_evaluations()}
    accounting = checks[(TOPIC_KEYS["orders"], CHECK_ACCOUNTING)]
    assert accounting.passed
    assert set(accounting.metadata["by_hour"].value) == set(keys)
    log_meta = next(
        m.materialization.metadata for m in result.get_asset_materialization_events() if m.asset_key == INGEST_LOG_KEY
    )
    assert log_meta["lines"].value == sum(r["lines"] for r in contents(settings)[bs.INGEST_LOG_TABLE].to_pylist())
    assert log_meta["arrival_hours"].value == len(keys)


def test_range_of_one_hour_is_ingest_hour(tmp_path, landing):
    settings = local_settings(tmp_path, landing_dir=landing)
    hour = list_arrival_hours(landing)[0]
    (report,) = ingest_hours(settings, [hour + timedelta(minutes=30)])
    props = load_catalog(settings).load_table("bronze.orders").current_snapshot().summary.additional_properties
    assert props[PROP_PARTITION_KEY] == hour_key(hour)
    assert props[PROP_FINGERPRINT] == report.topics["orders"].fingerprint
    with pytest.raises(ValueError, match="no arrival hours"):
        ingest_hours(settings, [])


def test_range_over_a_compacted_day_replaces_only_its_hours(tmp_path, landing, hour_by_hour):
    from logistics_platform.lib.maintenance import maintain_catalog
    from logistics_platform.lib.maintenance.options import MaintenanceOptions

    settings, hours = _range_world(tmp_path, landing)
    catalog = load_catalog(settings)
    options = MaintenanceOptions(
        small_file_bytes=32 * 1024 * 1024,
        target_file_bytes=128 * 1024 * 1024,
        snapshot_retention=timedelta(days=7),
        min_snapshots_to_keep=10,
        orphan_safety_window=timedelta(days=3),
        max_manifests_per_snapshot=100,
        now=datetime.now(UTC) + timedelta(seconds=1),
    )
    reports = {r.table: r for r in maintain_catalog(catalog, options)}
    assert reports["bronze.orders"].compaction is not None and reports["bronze.orders"].compaction.committed
    # Files now hold several hours of a day: the replace of a sub-range rewrites them (copy-on-write), one commit.
    commits_before = len(catalog.load_table("bronze.orders").metadata.metadata_log)
    ingest_hours(settings, hours[1:3])
    assert len(catalog.load_table("bronze.orders").metadata.metadata_log) == commits_before + 1
    got = contents(settings)
    assert all(got[n].equals(hour_by_hour[n]) for n in TABLES)
