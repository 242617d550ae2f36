"""The settings module: defaults, overrides and the errors a person sees for bad values."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from logistics_platform.settings import (
    DBT_PROJECT_DIR,
    DBT_VARIABLES,
    PROJECT_ROOT,
    SETTINGS_DOC,
    VARIABLES,
    Settings,
    SettingsError,
    dbt_env,
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
        ({"ALLOWED_LATENESS_HOURS": "-1"}, "greater than or equal to 0"),
        ({"PARTITIONS_START": "2026-11-01"}, "PARTITIONS_START"),
        ({"LOGISTICS_ENV": "prod"}, "PostgreSQL"),
        ({"SLA_WINDOW_MINUTES": "7"}, "divisor of 60"),
        ({"SLA_WINDOW_MINUTES": "0"}, "divisor of 60"),
        ({"GPS_JUMP_KMH": "fast"}, "GPS_JUMP_KMH"),
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


def test_a_given_mapping_reads_no_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `make` exports DAGSTER_HOME: a test's local_settings must still get a throwaway instance (dagster_home None).
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DBT_THREADS", "16")
    s = local_settings(tmp_path)
    assert (s.dagster_home, s.dbt_threads) == (None, 4)
    assert load_settings({}).dagster_home is None and s.with_overrides(dbt_threads=2).dagster_home is None
    assert load_settings().dagster_home == tmp_path / "home"


def test_operations_mart_settings_reach_dbt_as_environment() -> None:
    defaults = load_settings({})
    assert (defaults.sla_window_minutes, defaults.sla_min_deliveries) == (5, 20)
    assert (defaults.sla_late_share_max, defaults.gps_jump_kmh) == (0.05, 150.0)
    s = load_settings({"SLA_WINDOW_MINUTES": "15", "SLA_MIN_DELIVERIES": "3", "SLA_LATE_SHARE_MAX": "0.2"})
    env = subprocess_env(s.with_overrides(gps_jump_kmh=90.0))
    assert (env["SLA_WINDOW_MINUTES"], env["SLA_MIN_DELIVERIES"], env["SLA_LATE_SHARE_MAX"]) == ("15", "3", "0.2")
    assert env["GPS_JUMP_KMH"] == "90.0"


def test_the_process_environment_loads_like_a_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES.values():
        monkeypatch.delenv(name, raising=False)
    assert load_settings() == load_settings({}) == Settings()
    assert (Settings().dbt_threads, Settings().duckdb_memory_limit) == (4, "8GB")
    monkeypatch.setenv("DBT_THREADS", "16")
    monkeypatch.setenv("ALERT_WEBHOOK_URL", "")  # empty = unset
    assert load_settings() == load_settings({"DBT_THREADS": "16"}) and load_settings().alert_webhook_url is None
    monkeypatch.setenv("DBT_THREADS", "0")
    with pytest.raises(SettingsError, match="DBT_THREADS='0': Input should be greater than or equal to 1"):
        load_settings()


def test_dbt_gets_the_settings_declared_for_it_and_the_s3_ones_only_when_set() -> None:
    declared = DBT_VARIABLES
    assert {"DUCKDB_PATH", "DBT_TARGET", "SLA_WINDOW_MINUTES", "ICEBERG_S3_REGION"} <= declared
    assert "INGEST_WORKERS" not in declared
    tools = {"DO_NOT_TRACK", "DBT_SEND_ANONYMOUS_USAGE_STATS"}
    assert set(dbt_env(load_settings({}))) == declared - {n for n in declared if n.startswith("ICEBERG_S3_")} | tools
    env = dbt_env(load_settings({"ICEBERG_S3_REGION": "eu-west-3", "DBT_THREADS": "16"}))
    assert (env["ICEBERG_S3_REGION"], env["DBT_THREADS"]) == ("eu-west-3", "16") and "ICEBERG_S3_ENDPOINT" not in env


# env_var('NAME') and env_var('NAME', default) in the dbt project's Jinja; the arrival window's names are built
# (env_var('LOGISTICS_DBT_' ~ name, '')): it is no setting, and optional by design.
ENV_VAR = re.compile(r"env_var\(\s*'([A-Za-z0-9_]+)'\s*([,)~])")


def test_dbt_reads_only_declared_settings_and_has_no_defaults_of_its_own() -> None:
    declared = DBT_VARIABLES
    folders = ("models", "macros", "tests", "seeds")
    sources = [*DBT_PROJECT_DIR.glob("*.yml"), *(p for f in folders for p in (DBT_PROJECT_DIR / f).rglob("*"))]
    uses = [
        (path.relative_to(DBT_PROJECT_DIR), name, after)
        for path in sorted(sources)
        if path.suffix in (".sql", ".yml")
        for name, after in ENV_VAR.findall(path.read_text())
    ]
    assert {name for _p, name, _a in uses} >= {"DBT_TARGET", "DUCKDB_PATH", "SLA_WINDOW_MINUTES", "GPS_JUMP_KMH"}
    for path, name, after in uses:
        if after == "~":
            assert name == "LOGISTICS_DBT_", path
            continue
        assert name in declared, f"{path}: env_var('{name}') is not a setting declared for dbt in settings.py"
        assert after == ")", f"{path}: env_var('{name}', ...) has a default; settings.py declares it"


def test_every_setting_is_documented() -> None:
    assert all(meaning for _default, meaning in SETTINGS_DOC.values())
    assert {"LOGISTICS_ENV", "LANDING_DIR", "ICEBERG_CATALOG_URI", "ICEBERG_WAREHOUSE", "DUCKDB_PATH"} <= set(
        SETTINGS_DOC
    )
    assert {"ALLOWED_LATENESS_HOURS", "ALERT_WEBHOOK_URL"} <= set(SETTINGS_DOC)


# ---------------------------------------------------------------- the settings page's table

SETTINGS_PAGE = PROJECT_ROOT / "docs" / "settings.md"
TABLE_START = "<!-- settings table: generated from settings.SETTINGS_DOC by `python -m tests.test_settings` -->"
TABLE_END = "<!-- end of settings table -->"


def settings_table(doc: dict[str, tuple[str, str]] = SETTINGS_DOC) -> str:
    """The settings table of docs/settings.md (variable, default, meaning) as ``SETTINGS_DOC`` says it should read."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for name, (default, meaning) in doc.items():
        cell = meaning.replace("|", r"\|")
        rows.append(f"| `{name}` | `{default}` | {cell} |")
    return "\n".join(rows)


def readme_settings_table(text: str) -> str:
    """The table between the settings page's markers."""
    if text.count(TABLE_START) != 1 or text.count(TABLE_END) != 1:
        raise AssertionError(f"docs/settings.md needs one {TABLE_START!r} and one {TABLE_END!r} around the table")
    return text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()


def write_readme_settings_table(path: Path = SETTINGS_PAGE) -> None:
    """Rewrite the table between the markers from ``SETTINGS_DOC`` (what the test below compares)."""
    text = path.read_text()
    head, rest = text.split(TABLE_START, 1)
    _old, tail = rest.split(TABLE_END, 1)
    path.write_text(f"{head}{TABLE_START}\n{settings_table()}\n{TABLE_END}{tail}")


def test_readme_settings_table_matches_settings_doc() -> None:
    assert readme_settings_table(SETTINGS_PAGE.read_text()) == settings_table(), (
        "docs/settings.md's settings table differs from settings.SETTINGS_DOC: regenerate it with "
        "`.venv/bin/python -m tests.test_settings`"
    )


@pytest.mark.parametrize("bad", ["0", "70000"])
def test_dashboard_port_must_be_a_port(bad: str) -> None:
    with pytest.raises(SettingsError, match="DASHBOARD_PORT"):
        load_settings({"DASHBOARD_PORT": bad})
    assert load_settings({"DASHBOARD_PORT": "9123"}).dashboard_port == 9123


def test_settings_table_follows_the_doc() -> None:
    table = settings_table({"A_SETTING": ("1", "What it does | with a pipe.")})
    assert table.splitlines()[2:] == [r"| `A_SETTING` | `1` | What it does \| with a pipe. |"]
    assert settings_table() != settings_table({**SETTINGS_DOC, "NEW_SETTING": ("0", "New.")})


if __name__ == "__main__":
    write_readme_settings_table()
    print(f"rewrote the settings table in {SETTINGS_PAGE}")
