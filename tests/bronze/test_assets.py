"""The bronze multi-asset in Dagster: materialize() of one arrival-hour partition with its checks."""

from __future__ import annotations

import dagster as dg
import pytest

from logistics_platform import resources
from logistics_platform.defs.bronze import build_defs
from logistics_platform.defs.bronze.assets import build_bronze_assets
from logistics_platform.defs.bronze.checks import CHECK_ACCOUNTING, CHECK_QUARANTINE_RATE, CHECK_SCHEMA_STABLE
from logistics_platform.defs.bronze.keys import BRONZE_ASSET_KEYS, LANDING_KEYS, QUARANTINE_KEY, TOPIC_KEYS
from logistics_platform.defs.constants import INGEST_LOG_KEY
from logistics_platform.lib import connections
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.resources import build_resources
from logistics_platform.settings import local_settings
from tests.support.bronze import HOUR, contract_hour


def test_definitions_shape(tmp_path):
    settings = local_settings(tmp_path)
    defs = dg.Definitions.merge(build_defs(settings), dg.Definitions(resources=build_resources(settings)))
    graph = defs.resolve_asset_graph()
    assert set(BRONZE_ASSET_KEYS) | set(LANDING_KEYS.values()) <= set(graph.get_all_asset_keys())
    for key in BRONZE_ASSET_KEYS:
        node = graph.get(key)
        assert node.group_name == "bronze"
        assert "iceberg" in node.kinds
        assert node.owners and node.description
        assert node.partitions_def is not None
        assert "dagster/column_schema" in node.metadata
    assert graph.get(TOPIC_KEYS["orders"]).parent_keys == {LANDING_KEYS["orders"]}
    assert graph.get(LANDING_KEYS["orders"]).group_name == "landing"
    assert not graph.get(LANDING_KEYS["orders"]).is_materializable


def test_materialize_partition_with_checks(tmp_path):
    settings = local_settings(tmp_path)
    contract_hour(settings.landing_dir)
    assets = build_bronze_assets(settings)
    result = dg.materialize([assets], partition_key=hour_key(HOUR), resources=build_resources(settings))
    assert result.success

    mats = {m.asset_key: m for m in result.get_asset_materialization_events()}
    assert set(mats) == set(BRONZE_ASSET_KEYS)
    orders = mats[TOPIC_KEYS["orders"]].materialization.metadata
    assert orders["rows"].value == 7 and orders["tombstones"].value == 2 and orders["late_events"].value == 1
    assert orders["quarantined_by_reason"].value["malformed_json"] == 3
    assert orders["files_read"].value == 2 and orders["bytes_read"].value > 0
    assert orders["dagster/row_count"].value == 7
    columns = [c.name for c in orders["dagster/column_schema"].value.columns]
    assert "tip_amount" in columns  # the evolved schema, not only the contract
    assert "dagster/column_schema" not in mats[TOPIC_KEYS["payments"]].materialization.metadata  # as defined
    assert mats[INGEST_LOG_KEY].materialization.metadata["snapshot_ids"].value["orders"]

    checks = {(c.asset_key, c.check_name): c for c in result.get_asset_check_evaluations()}
    for key in TOPIC_KEYS.values():
        assert checks[(key, CHECK_ACCOUNTING)].passed, key
    # the contract hour is deliberately dirty and grew a column: both warnings fire, as warnings
    rate = checks[(QUARANTINE_KEY, CHECK_QUARANTINE_RATE)]
    assert not rate.passed and rate.severity == dg.AssetCheckSeverity.WARN
    grew = checks[(TOPIC_KEYS["orders"], CHECK_SCHEMA_STABLE)]
    assert not grew.passed and grew.severity == dg.AssetCheckSeverity.WARN
    assert checks[(TOPIC_KEYS["payments"], CHECK_SCHEMA_STABLE)].passed

    again = dg.materialize([assets], partition_key=hour_key(HOUR), resources=build_resources(settings))
    checks = {(c.asset_key, c.check_name): c for c in again.get_asset_check_evaluations()}
    assert checks[(TOPIC_KEYS["orders"], CHECK_SCHEMA_STABLE)].passed  # nothing new the second time
    assert all(checks[(k, CHECK_ACCOUNTING)].passed for k in TOPIC_KEYS.values())


def test_one_ingest_run_opens_the_catalog_once(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """The run's IcebergCatalog resource is opened once and handed to the ingest, its metadata and its accounting."""
    settings = local_settings(tmp_path)
    contract_hour(settings.landing_dir)
    opened = []

    def counting_load_catalog(s):  # the real opener, counted
        opened.append(s.catalog_uri)
        return real(s)

    real = connections.load_catalog
    monkeypatch.setattr(connections, "load_catalog", counting_load_catalog)
    monkeypatch.setattr(resources, "load_catalog", counting_load_catalog)
    assets = build_bronze_assets(settings)
    assert dg.materialize([assets], partition_key=hour_key(HOUR), resources=build_resources(settings)).success
    assert opened == [settings.catalog_uri]
