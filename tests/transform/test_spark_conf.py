"""The `spark` target's session settings (lib/transform/spark.py), without starting Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from logistics_platform.lib.transform.project import dbt_executable, target_environment
from logistics_platform.lib.transform.spark import (
    AUDIT_BRANCH,
    jdbc_catalog,
    spark_conf,
    spark_work_dir,
    write_spark_conf,
)
from logistics_platform.settings import local_settings


def test_the_sql_catalog_becomes_jdbc_catalog_properties(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    assert jdbc_catalog(settings) == {"uri": f"jdbc:sqlite:{tmp_path / 'warehouse' / 'catalog.db'}"}
    pg = settings.with_overrides(catalog_uri="postgresql+psycopg2://fleet:secret@db.internal:6432/iceberg")
    assert jdbc_catalog(pg) == {
        "uri": "jdbc:postgresql://db.internal:6432/iceberg",
        "jdbc.user": "fleet",
        "jdbc.password": "secret",
    }
    with pytest.raises(ValueError, match="SQLite or PostgreSQL"):
        jdbc_catalog(settings.with_overrides(catalog_uri="mysql://x@y/z"))


def test_session_settings_name_the_catalog_and_keep_derby_out_of_the_project(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "jars").mkdir(parents=True)
    (venv / "jars" / "iceberg.jar").write_bytes(b"")
    settings = local_settings(tmp_path).with_overrides(
        dbt_target="spark", spark_venv=venv, catalog_name="fleet", spark_master="spark://m:7077"
    )
    conf = spark_conf(settings)
    assert conf["spark.sql.defaultCatalog"] == "fleet"
    assert conf["spark.sql.catalog.fleet.catalog-impl"] == "org.apache.iceberg.jdbc.JdbcCatalog"
    assert conf["spark.sql.catalog.fleet.warehouse"] == settings.warehouse
    assert conf["spark.master"] == "spark://m:7077"
    # The marts' writes go to the audit branch (dbt_project/macros/spark/audit_gate.sql moves main).
    assert conf["spark.wap.branch"] == AUDIT_BRANCH
    # A cluster's executors connect to the driver: it is bound to loopback only with a local master.
    assert "spark.driver.host" not in conf
    assert spark_conf(settings.with_overrides(spark_master="local[2]"))["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.jars"] == str(venv / "jars" / "iceberg.jar")
    assert str(spark_work_dir(settings)) in conf["spark.driver.extraJavaOptions"]
    conf_dir = write_spark_conf(settings)
    assert "spark.sql.defaultCatalog fleet\n" in (conf_dir / "spark-defaults.conf").read_text()
    assert target_environment(settings) == {"SPARK_CONF_DIR": str(conf_dir)}
    assert dbt_executable(settings) == str(venv / "bin" / "dbt")
    assert target_environment(settings.with_overrides(dbt_target="local")) == {}


def test_without_the_spark_venv_the_error_says_what_to_run(tmp_path: Path) -> None:
    settings = local_settings(tmp_path).with_overrides(dbt_target="spark", spark_venv=tmp_path / "none")
    with pytest.raises(FileNotFoundError, match="make spark-env"):
        spark_conf(settings)


def test_a_conf_file_adds_and_overrides_session_settings(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "jars").mkdir(parents=True)
    (venv / "jars" / "iceberg.jar").write_bytes(b"")
    extra = tmp_path / "cluster.conf"
    extra.write_text(
        "# Kubernetes, client mode\nspark.kubernetes.container.image  registry/spark-iceberg:3.5\n\n"
        "spark.driver.host 10.0.0.7\nspark.sql.shuffle.partitions=64\n"
    )
    settings = local_settings(tmp_path).with_overrides(
        dbt_target="spark", spark_venv=venv, spark_master="k8s://https://api:6443", spark_conf_file=extra
    )
    conf = spark_conf(settings)
    assert conf["spark.kubernetes.container.image"] == "registry/spark-iceberg:3.5"
    assert conf["spark.driver.host"] == "10.0.0.7"
    assert conf["spark.sql.shuffle.partitions"] == "64"
    assert conf["spark.sql.defaultCatalog"] == settings.catalog_name
    extra.write_text("spark.executor.instances\n")
    with pytest.raises(ValueError, match=r"line 1.*not `key value`"):
        spark_conf(settings)
    with pytest.raises(FileNotFoundError, match="SPARK_CONF_FILE"):
        spark_conf(settings.with_overrides(spark_conf_file=tmp_path / "missing.conf"))
