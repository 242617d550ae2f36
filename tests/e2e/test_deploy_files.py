"""The deployment files agree with the settings module and dagster.prod.yaml (no Docker daemon or cluster here:
they are parsed, and their environments are loaded by ``load_settings``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from logistics_platform.settings import PROJECT_ROOT, SETTINGS_DOC, Settings, load_settings

DEPLOY = PROJECT_ROOT / "deploy"
DAGSTER_SERVICES = ("code_location", "webserver", "daemon")
# Variables the images may carry besides the platform's settings: read by Dagster (dagster.prod.yaml) or by tools.
TOOL_VARS = {"DO_NOT_TRACK", "DBT_SEND_ANONYMOUS_USAGE_STATS"}
SECRET_SETTINGS = {"ICEBERG_CATALOG_URI", "ICEBERG_S3_ACCESS_KEY_ID", "ICEBERG_S3_SECRET_ACCESS_KEY"}
# Every path setting must be on a volume: the state outlives the container.
PATH_SETTINGS = {"LANDING_DIR": False, "DUCKDB_PATH": True, "ALERTS_LOG": True}  # name -> is a file


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _prod_yaml() -> dict[str, Any]:
    return _yaml(PROJECT_ROOT / "dagster.prod.yaml")


def _dagster_env_vars(node: Any) -> set[str]:
    """The variables dagster.prod.yaml reads (`{env: NAME}`)."""
    if isinstance(node, dict):
        if set(node) == {"env"}:
            return {node["env"]}
        return set().union(*(_dagster_env_vars(v) for v in node.values()))
    return set()


def _interpolate(value: str) -> str:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error} with a stand-in value for every variable."""
    return re.sub(r"\$\{(\w+)(?::[-?][^}]*)?\}", lambda m: f"test-{m[1].lower()}", value)


def _under_mount(path: str, mounts: set[str], is_file: bool) -> bool:
    target = PurePosixPath(path).parent if is_file else PurePosixPath(path)
    return any(target == PurePosixPath(m) or PurePosixPath(m) in target.parents for m in mounts)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _yaml(DEPLOY / "docker-compose.yaml")


def test_compose_runs_the_platform_beside_postgres_and_s3_with_state_on_volumes(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {*DAGSTER_SERVICES, "postgres", "s3"} <= set(services)
    named = set(compose["volumes"])

    def mounts(service: str) -> dict[str, str]:
        """container path -> named volume"""
        out = {}
        for spec in services[service].get("volumes", []):
            source, target = spec.split(":")[:2]
            out[target] = source
        return out

    assert mounts("postgres")["/var/lib/postgresql/data"] in named
    assert mounts("s3")["/data"] in named
    for service in DAGSTER_SERVICES:
        env = services[service]["environment"]
        assert set(env) <= set(SETTINGS_DOC) | _dagster_env_vars(_prod_yaml()) | TOOL_VARS, service
        assert _dagster_env_vars(_prod_yaml()) <= set(env), f"{service} lacks a DAGSTER_PG_* variable"
        settings = load_settings({k: _interpolate(str(v)) for k, v in env.items()})
        assert settings.env == "prod"
        assert settings.catalog_uri.startswith("postgresql+psycopg2://")
        assert settings.warehouse.startswith("s3://") and settings.s3["s3.endpoint"] == "http://s3:9000"
        # The catalog and Dagster storage are the postgres service; the warehouse endpoint is the s3 service.
        assert "@postgres:5432/" in settings.catalog_uri and env["DAGSTER_PG_HOST"] == "postgres"
        for name in SECRET_SETTINGS | {"DAGSTER_PG_PASSWORD"}:
            assert "${" in str(env[name]), f"{name} must come from the environment, not the file"
    # Runs execute in the code location: every path setting there is on a named volume.
    code = services["code_location"]
    volumes = {target for target, source in mounts("code_location").items() if source in named}
    for name, is_file in PATH_SETTINGS.items():
        assert _under_mount(code["environment"][name], volumes, is_file), f"{name} is not on a volume"


def test_the_image_carries_the_prod_instance_and_the_workspace_names_the_code_location(
    compose: dict[str, Any],
) -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    home = re.search(r"DAGSTER_HOME=(\S+)", dockerfile)
    assert home is not None
    assert f"COPY dagster.prod.yaml {home[1]}/dagster.yaml" in dockerfile
    assert "-c constraints.txt" in dockerfile
    for copied in re.findall(r"^COPY (\S+) ", dockerfile, re.M):
        assert (PROJECT_ROOT / copied).exists(), copied

    workspace = _yaml(DEPLOY / "workspace.yaml")["load_from"][0]["grpc_server"]
    code = compose["services"]["code_location"]
    assert workspace["host"] == "code_location"
    assert code["command"][code["command"].index("-p") + 1] == str(workspace["port"])
    module = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["dagster"]["module_name"]
    assert code["command"][code["command"].index("-m") + 1] == module
    for service in ("webserver", "daemon"):
        command = compose["services"][service]["command"]
        assert command[command.index("-w") + 1] == "/opt/dagster/app/deploy/workspace.yaml"
    assert (
        "COPY deploy/workspace.yaml ./deploy/workspace.yaml" in dockerfile and "WORKDIR /opt/dagster/app" in dockerfile
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_helm_values_mirror_the_prod_instance_and_the_settings() -> None:
    values = _yaml(DEPLOY / "helm" / "values.yaml")
    prod = _prod_yaml()
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    module = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["dagster"]["module_name"]
    assert deployment["dagsterApiGrpcArgs"] == ["--module-name", module]

    env = {e["name"]: e["value"] for e in deployment["env"]}
    assert set(env) <= set(SETTINGS_DOC) | TOOL_VARS
    assert not SECRET_SETTINGS & set(env), "credentials belong in the envSecrets secret, not in the values"
    secrets = {s["name"] for s in deployment["envSecrets"]}
    # With the secret's catalog URI the environment loads as the prod profile.
    settings = load_settings({**env, "ICEBERG_CATALOG_URI": "postgresql+psycopg2://logistics:x@pg:5432/iceberg"})
    assert settings.env == "prod" and settings.warehouse.startswith("s3://")

    mounts = {m["mountPath"] for m in deployment["volumeMounts"]}
    claims = {v["name"] for v in deployment["volumes"] if "persistentVolumeClaim" in v}
    assert {m["name"] for m in deployment["volumeMounts"]} <= claims
    for name, is_file in PATH_SETTINGS.items():
        assert _under_mount(env[name], mounts, is_file), f"{name} is not on a volume"

    launcher = values["runLauncher"]
    assert launcher["type"] == "K8sRunLauncher"
    k8s = launcher["config"]["k8sRunLauncher"]
    assert {s["name"] for s in k8s["envSecrets"]} == secrets
    assert {m["mountPath"] for m in k8s["volumeMounts"]} == mounts

    pg = values["postgresql"]
    assert pg["enabled"] is False and pg["postgresqlHost"] and pg["postgresqlDatabase"]
    assert pg["postgresqlParams"] == prod["storage"]["postgres"]["postgres_db"]["params"]

    daemon = values["dagsterDaemon"]
    queue = daemon["runCoordinator"]
    assert queue["enabled"] and queue["type"] == "QueuedRunCoordinator"
    runs = prod["concurrency"]["runs"]
    assert queue["config"]["queuedRunCoordinator"] == {
        "maxConcurrentRuns": runs["max_concurrent_runs"],
        "tagConcurrencyLimits": runs["tag_concurrency_limits"],
    }
    for section in ("run_retries", "run_monitoring"):
        assert daemon[_camel(section)] == {_camel(k): v for k, v in prod[section].items()}, section


def test_every_prod_dagster_process_batches_its_events(compose: dict[str, Any]) -> None:
    """DAGSTER_EVENT_BATCH_SIZE, read by Dagster itself, in each process that writes events to PostgreSQL."""
    batch = str(Settings().dagster_event_batch_size)
    for service in DAGSTER_SERVICES:
        assert compose["services"][service]["environment"].get("DAGSTER_EVENT_BATCH_SIZE") == batch, service
    values = _yaml(DEPLOY / "helm" / "values.yaml")
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    for name, env in (
        ("code location and its runs", deployment["env"]),
        ("webserver", values["dagsterWebserver"]["env"]),
        ("daemon", values["dagsterDaemon"]["env"]),
    ):
        assert {e["name"]: e["value"] for e in env}.get("DAGSTER_EVENT_BATCH_SIZE") == batch, name
