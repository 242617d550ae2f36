"""Spark driver run by tests/e2e/test_spark.py in .venv-spark's python (PySpark, not the project's venv).

Opens our catalogs (PostgreSQL, SQLite) with Iceberg's own Java JdbcCatalog, reads every table the test names and
compares it with the parquet file pyiceberg exported of it, and computes the current state of the orders and revenue
per tenant and day from bronze to compare with the marts. Prints one JSON object on its last stdout line.

Usage: python spark_driver.py CONFIG.json, with keys jars, work_dir, catalogs ({name: {"uri": JDBC URL, "user":
optional, "warehouse": ...}}), tables ({"catalog.ns.table": exported parquet path}) and queries_catalog (the
catalog holding the pipeline's marts).
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
        # The tables are tiny: compiling generated code for each plan costs more than interpreting their rows.
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(Path(config["work_dir"]) / "spark-warehouse"))
    )
    for name, catalog in config["catalogs"].items():
        prefix = f"spark.sql.catalog.{name}"
        builder = (
            builder.config(prefix, "org.apache.iceberg.spark.SparkCatalog")
            .config(f"{prefix}.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
            .config(f"{prefix}.uri", catalog["uri"])
            .config(f"{prefix}.warehouse", catalog["warehouse"])
        )
        if catalog.get("user"):
            builder = builder.config(f"{prefix}.jdbc.user", catalog["user"])
    return builder.getOrCreate()


def differences(pairs: dict[str, tuple[DataFrame, DataFrame]]) -> dict[str, dict[str, int]]:
    """Per pair: both sides' row counts and the rows of each missing from the other (multiset difference).

    ``right`` is cast to ``left``'s column types and every row becomes one string with an explicit null marker, so
    that tables of different schemas share one job (one job for all, not several per table).
    """
    sides = []
    for name, (left, right) in pairs.items():
        right = right.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in left.schema.fields])
        for side, frame in ((1, left), (-1, right)):
            row = F.concat_ws("\x1f", *[F.coalesce(F.col(c).cast("string"), F.lit("\x00null")) for c in left.columns])
            sides.append(frame.select(F.lit(name).alias("pair"), F.lit(side).alias("side"), row.alias("row")))
    union = sides[0]
    for frame in sides[1:]:
        union = union.unionByName(frame)
    per_row = union.groupBy("pair", "row").agg(
        F.sum((F.col("side") == 1).cast("long")).alias("n_left"),
        F.sum((F.col("side") == -1).cast("long")).alias("n_right"),
    )
    totals = per_row.groupBy("pair").agg(
        F.sum("n_left").alias("rows"),
        F.sum("n_right").alias("other_rows"),
        F.sum(F.greatest(F.col("n_left") - F.col("n_right"), F.lit(0))).alias("only_left"),
        F.sum(F.greatest(F.col("n_right") - F.col("n_left"), F.lit(0))).alias("only_right"),
    )
    keys = ("rows", "other_rows", "only_left", "only_right")
    found = {r.pair: {k: int(r[k]) for k in keys} for r in totals.collect()}
    # A pair with no row on either side has no group.
    return {name: found.get(name, dict.fromkeys(keys, 0)) for name in pairs}


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
    started = time.monotonic()
    spark = session(config)
    seconds = {"session": time.monotonic() - started}
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {"spark_version": spark.version, "namespaces": {}, "listed": {}}
    for name in config["catalogs"]:
        # JdbcCatalog filters every row by its name: a name that wrote nothing sees no namespace.
        namespaces = sorted(r.namespace for r in spark.sql(f"show namespaces in {name}").collect())
        out["namespaces"][name] = namespaces
        out["listed"][name] = [f"{name}.{t}" for ns in namespaces for t in tables_in(spark, name, ns)]

    pairs = {ident: (spark.table(ident), spark.read.parquet(parquet)) for ident, parquet in config["tables"].items()}
    catalog = config["queries_catalog"]
    current = spark.sql(CURRENT_ORDERS.format(catalog=catalog))
    current.createOrReplaceTempView("spark_current_orders")
    revenue = spark.sql(REVENUE)
    queries = {
        "fct_orders": (current, spark.table(f"{catalog}.marts.fct_orders").select(current.columns)),
        "fct_daily_revenue": (revenue, spark.table(f"{catalog}.marts.fct_daily_revenue").select(revenue.columns)),
    }
    found = differences({**pairs, **{f"query {name}": pair for name, pair in queries.items()}})
    out["tables"] = {
        ident: {**found[ident], "main_snapshot": current_snapshot(spark, ident), "columns": table.columns}
        for ident, (table, _) in pairs.items()
    }
    out["queries"] = {name: found[f"query {name}"] for name in queries}
    seconds["compare"] = time.monotonic() - started - seconds["session"]
    out["seconds"] = {step: round(value, 1) for step, value in seconds.items()}
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
