"""The real Debezium 3.6 PostgreSQL connector at the front door (#27): what it writes, landed as a Kafka Connect
sink writes it, through the whole platform, against the PostgreSQL tables it captured.

One cluster and one engine process for the module (tests/support/debezium.py). Each converter config is landed on
its own (JSON Lines for the JsonConverter configs, Avro container files for the AvroConverter one) in one arrival hour.
The connector and Kafka Connect at their defaults (precise decimals, JSON with schemas) go through the whole pipeline
against PostgreSQL; every other config is ingested and must give exactly the same bronze rows, so the same marts
(everything below bronze reads bronze only): the decoding differs per config, the rest of the platform does not.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.cli.render import render_summary
from logistics_platform.defs.partitions import arrival_hour_partitions
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.capture.schema import KEYS, TABLES
from logistics_platform.lib.connections import connect
from logistics_platform.lib.contract import ORDER_COORDINATES
from logistics_platform.lib.timekeys import parse_hour_key
from logistics_platform.pipeline import Summary, run_pipeline
from logistics_platform.settings import Settings, local_settings
from tests.debezium.workload import TOAST_COURIER, TOAST_TENANT, oltp_database, table_rows, workload
from tests.support.bronze_equality import assert_same_bronze
from tests.support.connect_sink import land
from tests.support.debezium import ENGINE_MARKS, Captured, ConverterConfig, capture

pytestmark = ENGINE_MARKS

STRING_JSON = ConverterConfig("string", "json", schemas_enable=False)
STRING_JSON_SCHEMAS = ConverterConfig("string", "json", schemas_enable=True)
PRECISE_JSON = ConverterConfig("precise", "json", schemas_enable=False)
PRECISE_JSON_SCHEMAS = ConverterConfig("precise", "json", schemas_enable=True)
PRECISE_AVRO = ConverterConfig("precise", "avro")
CONFIGS = (STRING_JSON, STRING_JSON_SCHEMAS, PRECISE_JSON, PRECISE_JSON_SCHEMAS, PRECISE_AVRO)
DEFAULTS = PRECISE_JSON_SCHEMAS  # decimal.handling.mode=precise, JsonConverter schemas.enable=true


@dataclass
class World:
    """What the engine captured per config, and the OLTP tables after the workload."""

    captured: dict[ConverterConfig, Captured]
    tables: dict[str, list[tuple[Any, ...]]]


@pytest.fixture(scope="module")
def world() -> World:
    """The workload captured once by the real connector under every config of the module."""
    with oltp_database() as db:
        captured = capture(db, CONFIGS, workload)
        conn = db.connect()
        try:
            tables = {t: table_rows(conn, t, cols, KEYS[t]) for t, cols in TABLES.items()}
            tables["coordinates"] = table_rows(conn, "orders", ("order_id", *ORDER_COORDINATES), "order_id")
        finally:
            conn.close()
    return World(captured, tables)


def envelopes(captured: Captured) -> list[tuple[str, dict[str, Any]]]:
    """(topic, envelope) of every JSON record that is not a tombstone, schema wrapper removed."""
    out = []
    for r in captured.records:
        if r.value is not None:
            value = json.loads(r.value)
            out.append((r.topic, value["payload"] if "schema" in value else value))
    return out


def test_every_config_saw_the_same_changes_with_a_tombstone_after_each_delete(world: World) -> None:
    shapes = {}
    for config, captured in world.captured.items():
        shapes[config.name] = Counter((r.topic, r.value is None) for r in captured.records)
    assert len(set(map(frozenset, (s.items() for s in shapes.values())))) == 1, shapes
    ops = Counter((topic.rsplit(".", 1)[1], e["op"]) for topic, e in envelopes(world.captured[STRING_JSON]))
    for table in TABLES:
        expected = {"c", "u", "d"} | ({"r"} if table in ("tenants", "couriers") else set())
        assert {op for t, op in ops if t == table} == expected, table
    tombstones = Counter(r.topic.rsplit(".", 1)[1] for r in world.captured[STRING_JSON].records if r.value is None)
    assert tombstones == Counter({t: n for (t, op), n in ops.items() if op == "d"})


def test_the_captured_events_replay_to_the_oltp_tables(world: World) -> None:
    """Highest source.lsn wins, deletes remove: the live keys equal each table's (nothing missed after the marker)."""
    for table in TABLES:
        best: dict[Any, tuple[int, str]] = {}
        for topic, e in envelopes(world.captured[STRING_JSON]):
            if topic == f"oltp.public.{table}":
                key = (e["after"] or e["before"])[KEYS[table]]
                if key not in best or best[key][0] < e["source"]["lsn"]:
                    best[key] = (e["source"]["lsn"], e["op"])
        assert sorted(k for k, (_lsn, op) in best.items() if op != "d") == [r[0] for r in world.tables[table]], table


def test_landed_files_follow_the_sink_layout(world: World, tmp_path: Path) -> None:
    name = re.compile(r"^topics/(oltp\.public\.\w+)/dt=\d{4}-\d{2}-\d{2}/hr=\d{2}/\1\+0\+(\d{10})\.(json|avro)$")
    json_paths = land(world.captured[STRING_JSON], tmp_path / "json", flush_size=50)
    avro_paths = land(world.captured[PRECISE_AVRO], tmp_path / "avro", flush_size=50)
    for root, paths in ((tmp_path / "json", json_paths), (tmp_path / "avro", avro_paths)):
        assert paths and all(name.match(p.relative_to(root).as_posix()) for p in paths)
    # Sorted paths: by topic, then start offset (zero-padded), so the lines come in each topic's offset order.
    landed = [line for p in sorted(json_paths) for line in p.read_bytes().splitlines()]
    records = sorted(world.captured[STRING_JSON].records, key=lambda r: (r.topic, r.offset))
    assert landed == [r.value for r in records if r.value is not None]
    # DuckDB reads the container files: the same events, in the same order, as the JSON of the same engine.
    duck = connect()
    try:
        read = [
            (row[0], row[1])
            for p in sorted(avro_paths)
            for row in duck.execute(f"select op, source.lsn from read_avro('{p}')").fetchall()
        ]
    finally:
        duck.close()
    same_engine = sorted(world.captured[PRECISE_JSON].records, key=lambda r: (r.topic, r.offset))
    expected = [(e["op"], e["source"]["lsn"]) for e in (json.loads(r.value) for r in same_engine if r.value)]
    assert read == expected


def newest_hour(settings: Settings) -> datetime:
    """Where the sink lands: the newest arrival hour the platform takes (the open hour once it is a partition)."""
    return parse_hour_key(arrival_hour_partitions(settings).get_last_partition_key() or "")


@dataclass
class PlatformRun:
    settings: Settings
    summary: Summary
    quarantine: dict[str, int]  # reason -> lines


@pytest.fixture(scope="module")
def platform(world: World, landing_hour: datetime, tmp_path_factory: pytest.TempPathFactory) -> PlatformRun:
    """The defaults config's records landed and run through `logistics-platform run`'s pipeline."""
    settings = local_settings(tmp_path_factory.mktemp(DEFAULTS.name))
    land(world.captured[DEFAULTS], settings.landing_dir, landing_hour)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("DAGSTER_HOME", raising=False)  # an ephemeral Dagster instance for the run
        summary = run_pipeline(settings)
    duck = connect(settings.duckdb_path, read_only=True)
    try:
        quarantine = dict(duck.execute("select reason, count(*) from bronze.quarantine group by 1").fetchall())
    finally:
        duck.close()
    return PlatformRun(settings, summary, quarantine)


def test_fct_orders_equals_the_oltp_orders(world: World, platform: PlatformRun) -> None:
    assert platform.quarantine == {}, platform.quarantine
    assert platform.summary.ok, render_summary(platform.summary)
    duck = connect(platform.settings.duckdb_path, read_only=True)
    try:
        cols = ", ".join(TABLES["orders"])
        got = duck.execute(f"select {cols} from marts.fct_orders order by order_id").fetchall()
    finally:
        duck.close()
    assert got == world.tables["orders"]


@pytest.mark.parametrize("config", [c for c in CONFIGS if c != DEFAULTS], ids=lambda c: c.name)
def test_every_config_gives_the_bronze_rows_of_the_defaults(
    world: World, platform: PlatformRun, landing_hour: datetime, config: ConverterConfig, tmp_path: Path
) -> None:
    """Same values, types and event ids, line for line, whatever the decimal mode and converter; none quarantined."""
    settings = local_settings(tmp_path)
    land(world.captured[config], settings.landing_dir, landing_hour)
    ingest_hour(settings, landing_hour)
    assert_same_bronze(platform.settings, settings, TABLES)


def test_the_coordinates_added_part_way_reach_the_current_orders(world: World, platform: PlatformRun) -> None:
    """The orders table gained its coordinates by ALTER TABLE half way through the workload: bronze gains the columns
    from the records (Avro: the registry's next writer schema), and int_orders_current holds the OLTP values, null
    for the orders made before and for those inserted without them."""
    duck = connect(platform.settings.duckdb_path, read_only=True)
    try:
        cols = ", ".join(("order_id", *ORDER_COORDINATES))
        got = duck.execute(
            f"select {cols} from intermediate.int_orders_current where not is_deleted order by order_id"
        ).fetchall()
    finally:
        duck.close()
    assert got == world.tables["coordinates"]
    with_xy = sum(1 for r in got if r[1] is not None)
    assert 10 < with_xy < len(got) - 10, with_xy


def test_an_unchanged_toasted_column_keeps_its_value(world: World, platform: PlatformRun) -> None:
    duck = connect(platform.settings.duckdb_path, read_only=True)
    try:
        name = duck.execute(
            "select name from marts.dim_tenant where is_current and tenant_id = ?", [TOAST_TENANT]
        ).fetchone()
    finally:
        duck.close()
    expected = next(r[1] for r in world.tables["tenants"] if r[0] == TOAST_TENANT)
    assert name is not None and name[0] == expected, (name or ("",))[0][:40]


def test_an_unchanged_toasted_courier_name_keeps_its_value(world: World, platform: PlatformRun) -> None:
    """The connector sent the courier's name as the placeholder on its update of active; dim_courier keeps it."""
    placeholders = [
        e["after"]["active"]
        for topic, e in envelopes(world.captured[STRING_JSON])
        if topic == "oltp.public.couriers"
        and e["after"]
        and e["after"]["courier_id"] == TOAST_COURIER
        and e["after"]["name"] == "__debezium_unavailable_value"
    ]
    assert placeholders == [False]  # the update, and only it
    duck = connect(platform.settings.duckdb_path, read_only=True)
    try:
        courier = "select name, active from marts.dim_courier where courier_id = ?"
        got = duck.execute(courier, [TOAST_COURIER]).fetchone()
        flagged = duck.execute(
            "select count(*) from staging.stg_couriers where courier_id = ? and name_unavailable and name is null",
            [TOAST_COURIER],
        ).fetchone()
    finally:
        duck.close()
    expected = next(r for r in world.tables["couriers"] if r[0] == TOAST_COURIER)
    assert got is not None and got == (expected[1], expected[4]), (got or ("",))[0][:40]
    assert flagged == (1,)
