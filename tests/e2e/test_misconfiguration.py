"""A misconfigured catalog or warehouse fails at once with one line naming the setting to fix: in the command
line (`setup`, `run`) and inside Dagster (the step fails without its retries).

Produced for real: a closed port, a role and a database the local PostgreSQL does not have, a wrong password (on a
throwaway cluster that checks passwords: the shared server trusts every local login), a bucket the S3 server does not
have, and a secret key the S3 server refuses (moto with its IAM authentication on).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from sqlalchemy.engine import make_url

from logistics_platform.cli import main
from logistics_platform.defs.bronze import build_defs
from logistics_platform.lib.connections import MisconfiguredError, preflight
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, load_settings
from tests.capture.cluster import logical_cluster
from tests.conftest import S3Warehouse
from tests.support.bronze import HOUR, contract_hour
from tests.support.processes import one_line
from tests.support.s3 import Credentials, S3Server, authenticating_moto_server, free_port

CLOSED_PORT_URI = f"postgresql+psycopg2://postgres@127.0.0.1:{free_port()}/iceberg"


def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> Settings:
    """Point the command line at ``tmp_path`` with ``env`` on top (a local SQLite catalog unless it says otherwise)."""
    base = {
        "LANDING_DIR": str(tmp_path / "landing"),
        "ICEBERG_CATALOG_URI": f"sqlite:///{tmp_path / 'catalog.db'}",
        "ICEBERG_WAREHOUSE": f"file://{tmp_path / 'warehouse'}",
        "DUCKDB_PATH": str(tmp_path / "analytics.duckdb"),
    }
    for key, value in {**base, **env}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    return load_settings()


def test_a_closed_catalog_port_is_one_line_naming_the_catalog_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _environment(monkeypatch, tmp_path, ICEBERG_CATALOG_URI=CLOSED_PORT_URI)
    assert main(["setup"]) == 1
    one_line(capsys, "cannot reach the Iceberg catalog", "ICEBERG_CATALOG_URI", "Connection refused")
    contract_hour(tmp_path / "landing", HOUR)
    assert main(["run"]) == 1
    one_line(capsys, "logistics-platform run: error: cannot reach the Iceberg catalog", "ICEBERG_CATALOG_URI")


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("change", "needles"),
    [
        ({"username": "no_such_role"}, ("refused the login", 'role "no_such_role" does not exist')),
        ({"database": "no_such_database"}, ("catalog database", 'database "no_such_database" does not exist')),
    ],
)
def test_a_wrong_catalog_login_or_database_is_one_line_naming_the_catalog_uri(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, str],
    needles: tuple[str, ...],
) -> None:
    uri = make_url("postgresql+psycopg2://postgres:tst-pw-7d1@127.0.0.1:5432/postgres").set(**change)
    _environment(monkeypatch, tmp_path, ICEBERG_CATALOG_URI=uri.render_as_string(hide_password=False))
    assert main(["setup"]) == 1
    line = one_line(capsys, *needles, "ICEBERG_CATALOG_URI")
    assert "tst-pw-7d1" not in line and "***" in line


@pytest.mark.postgres
def test_a_wrong_catalog_password_is_one_line_naming_the_catalog_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with logical_cluster(password="right-pw-3c9") as cluster:
        uri = f"postgresql+psycopg2://postgres:{{}}@127.0.0.1:{cluster.port}/postgres"
        _environment(monkeypatch, tmp_path, ICEBERG_CATALOG_URI=uri.format("wrong-pw-5e2"))
        assert main(["setup"]) == 1
        line = one_line(capsys, "refused the login", "password authentication failed", "ICEBERG_CATALOG_URI")
        assert "wrong-pw-5e2" not in line and "***" in line
        # The right password on the same server passes: the refusal was the password's.
        _environment(monkeypatch, tmp_path, ICEBERG_CATALOG_URI=uri.format("right-pw-3c9"))
        assert main(["setup"]) == 0


@pytest.mark.s3
def test_a_missing_bucket_is_one_line_naming_the_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], s3_warehouse: S3Warehouse
) -> None:
    env = s3_warehouse.server.env("no-such-bucket")
    _environment(monkeypatch, tmp_path, **env)
    assert main(["setup"]) == 1
    one_line(capsys, "the S3 bucket 'no-such-bucket'", "does not exist", "ICEBERG_WAREHOUSE")
    assert main(["maintain", "--dry-run"]) == 1
    one_line(capsys, "the S3 bucket 'no-such-bucket'", "ICEBERG_WAREHOUSE")
    # The bucket of the test exists: the same settings on it pass.
    _environment(monkeypatch, tmp_path, **s3_warehouse.env)
    assert main(["setup"]) == 0


@pytest.mark.s3
def test_an_unreachable_s3_endpoint_is_one_line_naming_the_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], s3_warehouse: S3Warehouse
) -> None:
    env = {**s3_warehouse.env, "ICEBERG_S3_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    _environment(monkeypatch, tmp_path, **env)
    assert main(["setup"]) == 1
    one_line(capsys, "cannot reach S3", "ICEBERG_S3_ENDPOINT")


@pytest.fixture(scope="module")
def authenticating_s3() -> Iterator[tuple[S3Server, Credentials, str]]:
    """A moto server that checks credentials, its IAM user's key, and a bucket that key created."""
    with authenticating_moto_server() as (server, key):
        bucket = "authenticated-warehouse"
        server.client(key.access_key_id, key.secret_access_key).create_bucket(Bucket=bucket)
        yield server, key, bucket


@pytest.mark.s3
def test_wrong_s3_credentials_are_one_line_naming_the_key_settings(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    authenticating_s3: tuple[S3Server, Credentials, str],
) -> None:
    server, key, bucket = authenticating_s3
    right = {
        **server.env(bucket),
        "ICEBERG_S3_ACCESS_KEY_ID": key.access_key_id,
        "ICEBERG_S3_SECRET_ACCESS_KEY": key.secret_access_key,
    }
    preflight(_environment(monkeypatch, tmp_path, **right))  # the server accepts its user's key
    _environment(monkeypatch, tmp_path, **{**right, "ICEBERG_S3_SECRET_ACCESS_KEY": "tst-wrong-secret"})
    assert main(["setup"]) == 1
    line = one_line(capsys, "refused the credentials", "ICEBERG_S3_ACCESS_KEY_ID", "ICEBERG_S3_SECRET_ACCESS_KEY")
    assert "tst-wrong-secret" not in line and key.secret_access_key not in line
    with pytest.raises(MisconfiguredError) as unknown:
        preflight(_environment(monkeypatch, tmp_path, **{**right, "ICEBERG_S3_ACCESS_KEY_ID": "AKIANOSUCHKEY0000000"}))
    assert unknown.value.setting == "ICEBERG_S3_ACCESS_KEY_ID"


def test_inside_dagster_a_misconfigured_catalog_fails_the_step_once_without_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _environment(monkeypatch, tmp_path, ICEBERG_CATALOG_URI=CLOSED_PORT_URI)
    contract_hour(settings.landing_dir, HOUR)
    assets = list(build_defs(settings).assets or [])
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            assets,
            instance=instance,
            resources=build_resources(settings),
            partition_key=hour_key(HOUR),
            raise_on_error=False,
        )
        events = instance.all_logs(result.run_id)
    assert not result.success
    types = [e.dagster_event.event_type for e in events if e.dagster_event is not None]
    # The ingest's retry policy would re-run the step three times, with back-off: it is not applied.
    assert dg.DagsterEventType.STEP_UP_FOR_RETRY not in types
    assert types.count(dg.DagsterEventType.STEP_FAILURE) == 1
    (failure,) = result.get_step_failure_events()
    error = failure.step_failure_data.error
    assert error is not None and "cannot reach the Iceberg catalog" in error.message
    assert "ICEBERG_CATALOG_URI" in error.message
