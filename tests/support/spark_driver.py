"""Spark driver run by tests/e2e/test_spark.py in .venv-spark's python (PySpark, not the project's venv).

Opens the PostgreSQL catalog with Iceberg's own Java JdbcCatalog, reads every table the test names and compares it
with the parquet file pyiceberg exported of it, and computes the current state of the orders and revenue per
tenant and day from bronze to compare with the marts. Prints one JSON object on its last stdout line.

Usage: python spark_driver.py CONFIG.json, with keys catalog, other_catalog, jdbc_uri, jdbc_user, warehouse, jars,
tables ({"ns.table": {"parquet": path, "main_snapshot": id}}) and work_dir.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

CURRENT_ORDERS = """
    select order_id, tenant_id, courier_id, region, status, total_amount, delivery_fee,
           created_at, promised_at, delivered_at, updated_at, _lsn as last_lsn
    from (
        select *, row_number() over (partition by order_id order by _lsn desc) as change_rank
        from {catalog}.bronze.orders
    )
    where change_rank = 1 and _op <> 'd'
"""

REVENUE = """
    select cast(delivered_at as date) as revenue_date, tenant_id, count(*) as orders_delivered,
           sum(total_amount) as gross_revenue, sum(delivery_fee) as courier_revenue
    from spark_current_orders
    where status = 'delivered'
    group by 1, 2
"""


def session(config: dict[str, Any]) -> SparkSession:
    jars = sorted(str(p) for p in Path(config["jars"]).glob("*.jar"))
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("logistics-spark-check")
        # Offline and local only: no UI port, no lookups of the host's name, no package downloads (jars are local).
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.jars", ",".join(jars))
        # JDBC drivers register with DriverManager, which only sees the application class path.
        .config("spark.driver.extraClassPath", ":".join(jars))
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(Path(config["work_dir"]) / "spark-warehouse"))
    )
    for name in (config["catalog"], config["other_catalog"]):
        prefix = f"spark.sql.catalog.{name}"
        builder = (
            builder.config(prefix, "org.apache.iceberg.spark.SparkCatalog")
            .config(f"{prefix}.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
            .config(f"{prefix}.uri", config["jdbc_uri"])
            .config(f"{prefix}.jdbc.user", config["jdbc_user"])
            .config(f"{prefix}.warehouse", config["warehouse"])
        )
    return builder.getOrCreate()


def difference(left: DataFrame, right: DataFrame) -> dict[str, int]:
    """Row counts of both sides and the rows of each missing from the other (multiset difference), in one job.

    ``right`` is cast to ``left``'s column types. Every distinct row is counted on both sides: a row's surplus on one
    side is what the other lacks.
    """
    columns = left.columns
    right = right.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in left.schema.fields])
    sides = left.withColumn("_side", F.lit(1)).unionByName(right.withColumn("_side", F.lit(-1)))
    per_row = sides.groupBy(*columns).agg(
        F.sum((F.col("_side") == 1).cast("long")).alias("n_left"),
        F.sum((F.col("_side") == -1).cast("long")).alias("n_right"),
    )
    totals = per_row.agg(
        F.sum("n_left").alias("rows"),
        F.sum("n_right").alias("other_rows"),
        F.sum(F.greatest(F.col("n_left") - F.col("n_right"), F.lit(0))).alias("only_left"),
        F.sum(F.greatest(F.col("n_right") - F.col("n_left"), F.lit(0))).alias("only_right"),
    ).collect()[0]
    return {key: int(totals[key] or 0) for key in ("rows", "other_rows", "only_left", "only_right")}


def current_snapshot(spark: SparkSession, table: str) -> int | None:
    """The snapshot Spark reads, from the table properties Iceberg's SparkTable reports (no job to run)."""
    rows = spark.sql(f"show tblproperties {table} ('current-snapshot-id')").collect()
    value = rows[0].value if rows else "none"
    return int(value) if value.lstrip("-").isdigit() else None


def tables_in(spark: SparkSession, catalog: str, namespace: str) -> list[str]:
    rows = spark.sql(f"show tables in {catalog}.{namespace}").collect()
    return sorted(f"{namespace}.{r.tableName}" for r in rows)


def main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    # Spark would otherwise pick the address of the host's name, which need not be a loopback one.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    catalog = config["catalog"]
    started = time.monotonic()
    spark = session(config)
    seconds = {"session": time.monotonic() - started}
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {"spark_version": spark.version, "catalog": catalog}
    out["namespaces"] = sorted(r.namespace for r in spark.sql(f"show namespaces in {catalog}").collect())
    out["listed"] = [t for ns in out["namespaces"] for t in tables_in(spark, catalog, ns)]
    # The same database under another catalog name: JdbcCatalog filters every row by name.
    out["other_catalog_namespaces"] = [
        r.namespace for r in spark.sql(f"show namespaces in {config['other_catalog']}").collect()
    ]

    out["tables"] = {}
    for ident, expected in config["tables"].items():
        table = spark.table(f"{catalog}.{ident}")
        exported = spark.read.parquet(expected["parquet"])
        out["tables"][ident] = {
            **difference(table, exported),
            "main_snapshot": current_snapshot(spark, f"{catalog}.{ident}"),
            "columns": table.columns,
        }

    seconds["tables"] = time.monotonic() - started - seconds["session"]
    current = spark.sql(CURRENT_ORDERS.format(catalog=catalog))
    current.createOrReplaceTempView("spark_current_orders")
    revenue = spark.sql(REVENUE)
    revenue_mart = spark.table(f"{catalog}.marts.fct_daily_revenue").select(revenue.columns)
    out["queries"] = {
        "fct_orders": difference(current, spark.table(f"{catalog}.marts.fct_orders").select(current.columns)),
        "fct_daily_revenue": difference(revenue, revenue_mart),
    }
    seconds["queries"] = time.monotonic() - started - seconds["session"] - seconds["tables"]
    out["seconds"] = {step: round(value, 1) for step, value in seconds.items()}
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
