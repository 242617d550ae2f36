"""The settings module: defaults, overrides and the errors a person sees for bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from logistics_platform.settings import (
    PROJECT_ROOT,
    SETTINGS_DOC,
    Settings,
    SettingsError,
    load_settings,
    local_settings,
    subprocess_env,
)


def test_defaults_keep_state_inside_the_project() -> None:
    s = load_settings({})
    assert s.env == "local"
    assert s.landing_dir == PROJECT_ROOT / "landing"
    assert s.catalog_uri == f"sqlite:///{PROJECT_ROOT / 'iceberg_warehouse' / 'catalog.db'}"
    assert s.warehouse == f"file://{PROJECT_ROOT / 'iceberg_warehouse'}"
    assert s.duckdb_path == PROJECT_ROOT / "iceberg_warehouse" / "analytics.duckdb"
    assert s.allowed_lateness_hours == 2.0
    assert s.allowed_lateness_seconds == 7200
    assert s.alert_webhook_url is None
    assert s.dbt_target == "local"


def test_env_vars_override(tmp_path: Path) -> None:
    s = load_settings(
        {
            "LANDING_DIR": str(tmp_path / "in"),
            "ALLOWED_LATENESS_HOURS": "0.5",
            "ALERT_WEBHOOK_URL": "http://127.0.0.1:9/hook",
            "ICEBERG_WAREHOUSE": f"file://{tmp_path}/wh",
            "SNAPSHOT_MIN_KEEP": "3",
        }
    )
    assert s.landing_dir == tmp_path / "in"
    assert s.allowed_lateness_seconds == 1800
    assert s.alert_webhook_url == "http://127.0.0.1:9/hook"
    assert s.warehouse == f"file://{tmp_path}/wh"
    assert s.snapshot_min_keep == 3


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LOGISTICS_ENV": "staging"}, "LOGISTICS_ENV"),
        ({"ALLOWED_LATENESS_HOURS": "two"}, "ALLOWED_LATENESS_HOURS"),
        ({"ALLOWED_LATENESS_HOURS": "-1"}, "negative"),
        ({"PARTITIONS_START": "2026-11-01"}, "PARTITIONS_START"),
        ({"LOGISTICS_ENV": "prod"}, "PostgreSQL"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(env)


def test_prod_uses_postgres_and_s3() -> None:
    s = load_settings(
        {
            "LOGISTICS_ENV": "prod",
            "ICEBERG_CATALOG_URI": "postgresql+psycopg2://root@127.0.0.1:5432/iceberg",
            "ICEBERG_WAREHOUSE": "s3://lake/warehouse",
            "ICEBERG_S3_ENDPOINT": "http://127.0.0.1:9000",
        }
    )
    assert s.dbt_target == "prod"
    assert s.catalog_properties["s3.endpoint"] == "http://127.0.0.1:9000"
    assert s.catalog_properties["warehouse"] == "s3://lake/warehouse"


def test_local_settings_and_child_env(tmp_path: Path) -> None:
    s = local_settings(tmp_path, allowed_lateness_hours=1.0)
    assert isinstance(s, Settings)
    assert str(s.duckdb_path).startswith(str(tmp_path))
    env = subprocess_env(s)
    assert env["DUCKDB_PATH"] == str(s.duckdb_path)
    assert env["ICEBERG_CATALOG_URI"] == s.catalog_uri
    assert env["DO_NOT_TRACK"] == "1"


def test_every_setting_is_documented() -> None:
    assert all(meaning for _default, meaning in SETTINGS_DOC.values())
    assert {"LOGISTICS_ENV", "LANDING_DIR", "ICEBERG_CATALOG_URI", "ICEBERG_WAREHOUSE", "DUCKDB_PATH"} <= set(
        SETTINGS_DOC
    )
    assert {"ALLOWED_LATENESS_HOURS", "ALERT_WEBHOOK_URL"} <= set(SETTINGS_DOC)
