"""The production Dagster instance of ``dagster.prod.yaml``, started against a database of the local PostgreSQL."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy.engine import make_url

from logistics_platform.settings import PROJECT_ROOT, Settings, load_settings

PROD_YAML = PROJECT_ROOT / "dagster.prod.yaml"


def dagster_pg_env(pg_uri: str, password: str) -> dict[str, str]:
    """The DAGSTER_PG_* variables that dagster.prod.yaml reads, pointing at ``pg_uri``'s database."""
    url = make_url(pg_uri)
    return {
        "DAGSTER_PG_HOST": str(url.host),
        "DAGSTER_PG_PORT": str(url.port or 5432),
        "DAGSTER_PG_USER": str(url.username),
        "DAGSTER_PG_PASSWORD": password,
        "DAGSTER_PG_DB": str(url.database),
    }


@contextmanager
def prod_instance(
    home: Path, pg_uri: str, monkeypatch: pytest.MonkeyPatch, password: str = "not-checked"
) -> Iterator[dg.DagsterInstance]:
    """``DAGSTER_HOME`` = ``home`` holding dagster.prod.yaml as its dagster.yaml, the instance Dagster builds from it.

    The local server trusts 127.0.0.1, so any password is accepted: the secrets test sends a recognisable one.
    """
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROD_YAML, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for key, value in dagster_pg_env(pg_uri, password).items():
        monkeypatch.setenv(key, value)
    assert os.environ["DAGSTER_HOME"] == str(home)
    with dg.DagsterInstance.get() as instance:
        yield instance


def prod_settings(root: Path, landing: Path, catalog_uri: str, **env: str) -> Settings:
    """The prod profile as a deployment's environment gives it (local files stand in for the S3 warehouse)."""
    return load_settings(
        {
            "LOGISTICS_ENV": "prod",
            "ICEBERG_CATALOG_URI": catalog_uri,
            "ICEBERG_WAREHOUSE": f"file://{root / 'warehouse'}",
            "LANDING_DIR": str(landing),
            "DUCKDB_PATH": str(root / "analytics.duckdb"),
            "ALERTS_LOG": str(root / "alerts.jsonl"),
            **env,
        }
    )
