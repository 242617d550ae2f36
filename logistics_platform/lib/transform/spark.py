"""dbt's `spark` target: the Spark session settings that open our Iceberg catalog (written per settings into a
``spark-defaults.conf`` that PySpark's launcher reads, see docs/spark.md), and where the dbt of Spark lives."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url

from logistics_platform.settings import Settings

# The Iceberg branch the marts are written on until their tests pass (dbt_project/macros/spark/audit_gate.sql).
AUDIT_BRANCH = "audit"


def is_spark(settings: Settings) -> bool:
    """Whether the settings' dbt target runs on Spark (the `spark` target of profiles.yml)."""
    return settings.dbt_target == "spark"


def spark_work_dir(settings: Settings) -> Path:
    """Spark's working directory for dbt: conf, Derby's metastore and log, the session warehouse."""
    return settings.duckdb_path.parent / "spark"


def jdbc_catalog(settings: Settings) -> dict[str, str]:
    """The SQL catalog as Iceberg ``JdbcCatalog`` properties (``uri``, ``jdbc.user``, ``jdbc.password``)."""
    url = make_url(settings.catalog_uri)
    if url.drivername.startswith("sqlite"):
        return {"uri": f"jdbc:sqlite:{url.database}"}
    if not url.drivername.startswith("postgresql"):
        raise ValueError(
            f"ICEBERG_CATALOG_URI={settings.catalog_uri}: the spark target opens SQLite or PostgreSQL catalogs only; "
            "use one of those, or DBT_TARGET=local|prod"
        )
    properties = {"uri": f"jdbc:postgresql://{url.host or 'localhost'}:{url.port or 5432}/{url.database}"}
    return properties | {k: v for k, v in (("jdbc.user", url.username), ("jdbc.password", url.password)) if v}


def spark_conf(settings: Settings) -> dict[str, str]:
    """Spark session settings of dbt's `spark` target for ``settings`` (docs/spark.md explains each)."""
    # The jars scripts/spark_env.sh collected (Iceberg's runtime, re-shaded Jackson, the JDBC drivers).
    jars = [str(p) for p in sorted((settings.spark_venv / "jars").glob("*.jar"))]
    if not jars:
        raise FileNotFoundError(
            f"no jars in {settings.spark_venv / 'jars'}: DBT_TARGET=spark needs the Spark venv; run `make spark-env`"
        )
    work = spark_work_dir(settings)
    name = settings.catalog_name
    catalog = f"spark.sql.catalog.{name}"
    conf = {
        "spark.master": settings.spark_master,
        "spark.app.name": "logistics-dbt",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.jars": ",".join(jars),
        "spark.driver.extraClassPath": ":".join(jars),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={work}",
        "spark.sql.warehouse.dir": str(work / "spark-warehouse"),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.defaultCatalog": name,
        catalog: "org.apache.iceberg.spark.SparkCatalog",
        f"{catalog}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{catalog}.warehouse": settings.warehouse,
        "spark.sql.timestampType": "TIMESTAMP_NTZ",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parser.quotedRegexColumnNames": "true",
        "spark.wap.branch": AUDIT_BRANCH,
        "spark.sql.shuffle.partitions": "4",
    }
    conf |= {f"{catalog}.{key}": value for key, value in jdbc_catalog(settings).items()}
    if settings.spark_master.startswith("local"):  # loopback only; a cluster's executors must reach the driver
        conf |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    if settings.spark_conf_file is not None:
        conf |= read_conf_file(settings.spark_conf_file)
    return conf


def read_conf_file(path: Path) -> dict[str, str]:
    """``key value`` lines of a Spark properties file (spark-defaults.conf's form; ``#`` comments, blank lines)."""
    if not path.is_file():
        raise FileNotFoundError(f"SPARK_CONF_FILE={path}: no such file; point it at a file of `key value` lines")
    conf = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ") if " " in line else line.partition("=")
        if not key or not value.strip():
            raise ValueError(f"SPARK_CONF_FILE={path} line {number}: {line!r} is not `key value`; write one per line")
        conf[key.strip()] = value.strip()
    return conf


def write_spark_conf(settings: Settings) -> Path:
    """Write ``spark-defaults.conf`` for ``settings`` under :func:`spark_work_dir`; return its directory."""
    conf_dir = spark_work_dir(settings) / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{key} {value}\n" for key, value in sorted(spark_conf(settings).items()))
    path = conf_dir / "spark-defaults.conf"
    if not path.exists() or path.read_text() != text:
        staged = conf_dir / f".spark-defaults.conf.{id(text)}"
        staged.write_text(text)
        staged.replace(path)
    return conf_dir
