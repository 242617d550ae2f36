"""Pure parts of the transform domain: the arrival window as dbt vars/env, fold arguments, bronze view typing."""

from __future__ import annotations

from datetime import datetime

import pytest

from logistics_platform.lib import bronze_schema, duck
from logistics_platform.lib.bronze_views import bronze_tables, empty_select
from logistics_platform.lib.late import FoldError, resolve_topic, window_start
from logistics_platform.lib.transform import window_env, window_vars, window_vars_from_range


def test_window_vars_are_inclusive_hour_starts() -> None:
    assert window_vars(datetime(2026, 11, 2, 3, 17)) == {
        "min_arrival_hour": "2026-11-02 03:00:00",
        "max_arrival_hour": "2026-11-02 03:00:00",
    }
    # A Dagster time window is half-open: [03:00, 06:00) is the hours 03, 04 and 05.
    assert window_vars_from_range(datetime(2026, 11, 2, 3), datetime(2026, 11, 2, 6)) == {
        "min_arrival_hour": "2026-11-02 03:00:00",
        "max_arrival_hour": "2026-11-02 05:00:00",
    }
    with pytest.raises(ValueError, match="before it starts"):
        window_vars(datetime(2026, 11, 2, 5), datetime(2026, 11, 2, 3))


def test_window_env_names_match_the_dbt_macro() -> None:
    env = window_env(window_vars(datetime(2026, 11, 2, 3)))
    assert env == {
        "LOGISTICS_DBT_MIN_ARRIVAL_HOUR": "2026-11-02 03:00:00",
        "LOGISTICS_DBT_MAX_ARRIVAL_HOUR": "2026-11-02 03:00:00",
    }
    from logistics_platform.settings import DBT_PROJECT_DIR

    macro = (DBT_PROJECT_DIR / "macros" / "arrival_window.sql").read_text()
    assert "'LOGISTICS_DBT_' ~ (name | upper)" in macro


def test_fold_arguments_are_validated() -> None:
    assert resolve_topic("orders") == "oltp.public.orders"
    assert resolve_topic("logistics.tracking_pings") == "logistics.tracking_pings"
    with pytest.raises(FoldError, match="feeds no event-time window"):
        resolve_topic("tenants")
    assert window_start(datetime(2026, 11, 2, 3)) == datetime(2026, 11, 2, 3)
    with pytest.raises(FoldError, match="not an hour start"):
        window_start(datetime(2026, 11, 2, 3, 30))


def test_empty_bronze_views_have_the_contract_types() -> None:
    con = duck.connect()
    for name, schema in bronze_tables().items():
        described = con.sql(f"describe {empty_select(schema)}").fetchall()
        assert [r[0] for r in described] == [f.name for f in schema.fields], name
    orders = dict(
        (r[0], r[1])
        for r in con.sql(
            f"describe {empty_select(bronze_schema.table_schema(bronze_schema.TOPICS['orders']))}"
        ).fetchall()
    )
    assert orders["total_amount"] == "DECIMAL(12,2)" and orders["_arrival_hour"] == "TIMESTAMP"
