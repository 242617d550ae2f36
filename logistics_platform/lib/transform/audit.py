"""The blocking checks a mart's audit snapshot must pass before ``main`` may point at it, against the dbt contract
(``dbt_project/models/marts/<mart>.yml``). Each check returns its failures, one line each; empty is a pass."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import duckdb
import pyarrow as pa
import yaml  # type: ignore[import-untyped]  # PyYAML, a dependency of dbt-core
from pyiceberg.schema import Schema

from logistics_platform.settings import DBT_PROJECT_DIR

MARTS_DIR = DBT_PROJECT_DIR / "models" / "marts"
SHRINKING_MARTS = ("late_events",)  # loses rows by design (folds): no bound on its drop
ROW_DROP_MIN_ROWS = 100  # below this many rows on main the drop bound does not apply

# dbt contract data_type -> the Iceberg type pyiceberg writes for the DuckDB type (str() of the pyiceberg type).
_ICEBERG_TYPES = {"bigint": "long", "integer": "int", "int": "int", "varchar": "string"}
_ICEBERG_TYPES |= {same: same for same in ("boolean", "double", "date", "timestamp", "timestamptz")}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


@dataclass(frozen=True)
class Contract:
    """A mart's declared columns (name, dbt data_type, in order) and its key columns."""

    mart: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]


_TYPE_ALIASES = {"string": "varchar", "text": "varchar"}  # contracts say `string` (DuckDB, Spark SQL), DuckDB VARCHAR


def normalize_type(data_type: str) -> str:
    """A DuckDB or dbt type name in one comparable form (lower case, ``decimal(12,2)`` without spaces, ``varchar``)."""
    normal = re.sub(r"\s+", "", data_type.strip().lower())
    return _TYPE_ALIASES.get(normal, normal)


def iceberg_type(data_type: str) -> str:
    """The Iceberg type (as pyiceberg prints it) of a dbt contract data_type."""
    normal = normalize_type(data_type)
    if match := _DECIMAL.match(normal):
        return f"decimal({match.group(1)}, {match.group(2)})"
    if normal not in _ICEBERG_TYPES:
        raise ValueError(f"dbt data_type {data_type!r} has no Iceberg mapping: add it to audit._ICEBERG_TYPES")
    return _ICEBERG_TYPES[normal]


@cache
def load_contract(mart: str) -> Contract:
    """The contract of ``mart`` from its dbt YAML: columns with data_type, and the unique key its tests declare."""
    path = MARTS_DIR / f"{mart}.yml"
    if not path.exists():
        raise ValueError(f"no dbt contract for mart {mart}: expected {path}")
    doc = yaml.safe_load(path.read_text())
    if (model := next((m for m in doc.get("models", []) if m.get("name") == mart), None)) is None:
        raise ValueError(f"{path} declares no model named {mart}")
    columns = tuple((c["name"], c["data_type"]) for c in model.get("columns", []))
    key: tuple[str, ...] = ()
    for column in model.get("columns", []):
        if "unique" in [t if isinstance(t, str) else next(iter(t)) for t in column.get("data_tests", [])]:
            key = (column["name"],)
    for test in model.get("data_tests", []):
        if isinstance(test, dict) and "unique_combination_of_columns" in test:
            key = tuple(test["unique_combination_of_columns"]["arguments"]["combination_of_columns"])
    if not key:
        raise ValueError(f"{path}: declare the key of {mart} with a unique or unique_combination_of_columns test")
    return Contract(mart, columns, key)


def check_duckdb_contract(contract: Contract, described: list[tuple[str, str]]) -> list[str]:
    """The DuckDB mart's (column, type) list against the contract: same names, order and types."""
    actual = [(name, normalize_type(t)) for name, t in described]
    expected = [(name, normalize_type(t)) for name, t in contract.columns]
    return _column_differences(contract.mart, "DuckDB", actual, expected)


def check_iceberg_contract(contract: Contract, schema: Schema) -> list[str]:
    """The audited snapshot's Iceberg schema against the contract: same names, order and types."""
    actual = [(f.name, str(f.field_type)) for f in schema.fields]
    expected = [(name, iceberg_type(t)) for name, t in contract.columns]
    return _column_differences(contract.mart, "the audit snapshot", actual, expected)


def _column_differences(
    mart: str, where: str, actual: list[tuple[str, str]], expected: list[tuple[str, str]]
) -> list[str]:
    if actual == expected:
        return []
    names, wanted = [n for n, _ in actual], [n for n, _ in expected]
    if names != wanted:
        missing = [n for n in wanted if n not in names]
        extra = [n for n in names if n not in wanted]
        detail = f"missing {missing}, unexpected {extra}" if missing or extra else f"order {names}"
        return [f"contract: {where} columns of {mart} differ from its dbt contract ({detail})"]
    return [
        f"contract: {mart}.{name} is {got} in {where}, the dbt contract says {want}"
        for (name, got), (_, want) in zip(actual, expected, strict=True)
        if got != want
    ]


def _registered(con: duckdb.DuckDBPyConnection, **tables: pa.Table) -> duckdb.DuckDBPyConnection:
    """A cursor of ``con`` on which ``tables`` are views (they go with it when it is closed)."""
    cursor = con.cursor()
    for name, table in tables.items():
        cursor.register(name, table)
    return cursor


def check_keys(con: duckdb.DuckDBPyConnection, contract: Contract, rows: pa.Table) -> list[str]:
    """The contract key is never null and appears at most once."""
    quoted = [f'"{c}"' for c in contract.key]
    key = ", ".join(quoted)
    with _registered(con, audit_rows=rows) as cur:
        nulls = _scalar(cur, f"select count(*) from audit_rows where {' or '.join(f'{c} is null' for c in quoted)}")
        dupes = cur.sql(f"select {key}, count(*) as n from audit_rows group by all having n > 1 order by n desc")
        duplicated = dupes.fetchall()
    failures = []
    if nulls:
        failures.append(f"keys: {nulls} rows of {contract.mart} have a null key ({', '.join(contract.key)})")
    if duplicated:
        example = ", ".join(str(v) for v in duplicated[0][:-1])
        failures.append(
            f"keys: {len(duplicated)} keys of {contract.mart} ({', '.join(contract.key)}) appear more than once, "
            f"e.g. ({example}) {duplicated[0][-1]} times"
        )
    return failures


def check_keys_in_one_partition(
    con: duckdb.DuckDBPyConnection, contract: Contract, rows: pa.Table, rewritten: str
) -> list[str]:
    """No key of the rewritten ``rows`` is also in a partition the publish kept (``rewritten``: their predicate),
    as the DuckDB mart holds the kept partitions."""
    key = ", ".join(f'"{c}"' for c in contract.key)
    with _registered(con, audit_keys=rows.select(list(contract.key))) as cur:
        elsewhere = _scalar(
            cur,
            f"select count(*) from (select {key} from marts.{contract.mart} where ({rewritten}) is not true) "
            f"as kept semi join audit_keys using ({key})",
        )
    if not elsewhere:
        return []
    return [
        f"keys: {elsewhere} keys of {contract.mart} ({', '.join(contract.key)}) are both in a rewritten partition and "
        "in one this publish kept"
    ]


def check_row_count(mart: str, audited: int, built: int, on_main: int, max_row_drop: float) -> list[str]:
    """The snapshot holds exactly the DuckDB mart's rows, and does not shrink main by more than the bound."""
    failures = []
    if audited != built:
        failures.append(f"row count: the audit snapshot of {mart} holds {audited} rows, the DuckDB mart {built}")
    if mart not in SHRINKING_MARTS and on_main >= ROW_DROP_MIN_ROWS and audited < on_main * (1 - max_row_drop):
        failures.append(
            f"row count: {mart} would drop from {on_main} to {audited} rows on main, more than the allowed "
            f"{max_row_drop:.0%}: check the dbt run; if the drop is intended, re-run the publish with "
            "PUBLISH_MAX_ROW_DROP=1"
        )
    return failures


def check_revenue(
    con: duckdb.DuckDBPyConnection, daily_revenue: pa.Table, deliveries: pa.Table, orders: pa.Table
) -> list[str]:
    """Invariant 4a on the snapshots to publish: every row balances, and the rows add up to the delivered orders."""
    with _registered(con, audit_revenue=daily_revenue, audit_deliveries=deliveries, audit_orders=orders) as cur:
        unbalanced = _scalar(
            cur,
            "select count(*) from audit_revenue "
            "where gross_revenue is distinct from tenant_revenue + courier_revenue + platform_revenue",
        )
        mismatched = _scalar(
            cur,
            """
            with delivered as (
                select cast(d.delivered_at as date) as revenue_date, d.tenant_id,
                    count(*) as orders_delivered, sum(o.total_amount) as gross_revenue
                from audit_deliveries as d inner join audit_orders as o on d.order_id = o.order_id
                group by all
            )
            select count(*)
            from audit_revenue as r
            full outer join delivered as d on r.revenue_date = d.revenue_date and r.tenant_id = d.tenant_id
            where r.orders_delivered is distinct from d.orders_delivered
                or r.gross_revenue is distinct from d.gross_revenue
            """,
        )
    failures = []
    if unbalanced:
        failures.append(
            f"revenue: {unbalanced} rows of fct_daily_revenue do not add up to gross_revenue "
            "(tenant + courier + platform)"
        )
    if mismatched:
        failures.append(
            f"revenue: {mismatched} (revenue_date, tenant_id) rows of fct_daily_revenue disagree with "
            "fct_deliveries/fct_orders"
        )
    return failures


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.sql(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0
