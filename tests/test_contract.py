"""The source contract (lib/contract.py) against everything that restates it: what the generator writes, the OLTP
database the capture creates, dbt's ``_sources.yml`` and the staging models.

Each comparison goes to the real thing (generated files, a PostgreSQL database, dbt's manifest and a dbt run) and
maps contract types to what that thing should show independently of the code that derives it, so a column whose
type changes in the contract fails here until the hand-written parts follow.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from logistics_platform.generator import encode as E
from logistics_platform.generator import generate, model
from logistics_platform.generator.config import TABLES as GENERATOR_TABLES
from logistics_platform.lib import contract
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.views import duckdb_type
from logistics_platform.lib.capture import schema as capture_schema
from logistics_platform.lib.transform.project import dbt_project, run_dbt
from logistics_platform.settings import DBT_PROJECT_DIR, local_settings
from tests.generator.test_golden import CONFIG as GOLDEN_CONFIG

SOURCES = contract.SOURCES
STAGING = DBT_PROJECT_DIR / "models" / "staging"


def duck_type(t: contract.ColumnType) -> str:
    """The DuckDB type a contract column has in bronze and keeps in staging (lowercase, as dbt YAML writes it)."""
    return duckdb_type(bs.iceberg_type(t))


# ----------------------------------------------------------------------------------------------- the contract itself
def test_every_topic_has_its_key_first_and_its_allowed_values_in_its_doc() -> None:
    assert list(SOURCES) == ["tenants", "couriers", "orders", "payments", "tracking_pings"]
    for table, source in SOURCES.items():
        assert source.columns[0].name == source.key and not source.columns[0].nullable, table
        names = [c.name for c in source.columns + source.added_columns]
        assert len(names) == len(set(names)), table
        if source.cdc:
            assert source.topic == f"oltp.public.{table}", table
        for c in source.columns + source.added_columns:
            for value in c.values:
                assert value in c.doc, f"{table}.{c.name}: its doc does not name the allowed value {value!r}"
            if c.references:
                assert SOURCES[c.references].cdc and c.type == SOURCES[c.references].columns[0].type
    types: dict[str, set[str]] = defaultdict(set)
    for source in SOURCES.values():
        for c in source.columns + source.added_columns:
            types[c.name].add(str(c.type))
    assert {n: t for n, t in types.items() if len(t) > 1} == {}, "a column name with two types (tests read by name)"
    assert len({s.topic for s in SOURCES.values()}) == len(SOURCES), "one table per topic"
    assert contract.CDC_TABLES == ("tenants", "couriers", "orders", "payments")


def test_every_decimal_column_is_money() -> None:
    """The decimal decoders (lib/bronze/values.py, for every parse path) read numeric(12,2) only."""
    for table, source in SOURCES.items():
        for c in source.columns + source.added_columns:
            if c.type.is_decimal:
                assert c.type == contract.MONEY, (
                    f"{table}.{c.name} is {c.type}: teach the decoders of lib/bronze another decimal type first"
                )
    assert str(contract.MONEY) == "numeric(12,2)"
    assert re.fullmatch(contract.MONEY_TEXT_RE, "-1234567890.05")
    assert not re.fullmatch(contract.MONEY_TEXT_RE, "12345678901.05")
    assert not re.fullmatch(contract.MONEY_TEXT_RE, "1.5")


def test_bronze_tables_carry_the_contract_columns_then_the_metadata() -> None:
    expected = {
        contract.TEXT_NAME: "string",
        contract.BIGINT_NAME: "long",
        contract.BOOLEAN_NAME: "boolean",
        contract.DOUBLE_NAME: "double",
        contract.TIMESTAMPTZ_NAME: "timestamp",
        contract.NUMERIC_NAME: "decimal(12, 2)",
    }
    for table, source in SOURCES.items():
        spec = bs.TOPICS[table]
        assert (spec.topic, spec.key, spec.cdc) == (source.topic, source.key, source.cdc)
        fields = bs.table_schema(spec).fields
        assert [(f.field_id, f.name, str(f.field_type), f.doc, f.required) for f in fields[: len(source.columns)]] == [
            (i, c.name, expected[c.type.name], c.doc, False) for i, c in enumerate(source.columns, start=1)
        ]
        assert [f.name for f in fields[len(source.columns) :]] == [c.name for c in bs.metadata_columns(spec)]


def test_the_generator_and_the_capture_take_tables_keys_and_values_from_the_contract() -> None:
    assert tuple(SOURCES) == GENERATOR_TABLES
    assert [GENERATOR_TABLES[i] for i in (model.T_TENANTS, model.T_ORDERS, model.T_PINGS)] == [
        "tenants",
        "orders",
        "tracking_pings",
    ]
    assert {t: s.topic for t, s in SOURCES.items()} == model.TOPICS
    assert tuple(s.key for s in SOURCES.values()) == model.KEYS
    assert {t: SOURCES[t].column_names for t in contract.CDC_TABLES} == capture_schema.TABLES
    assert {t: SOURCES[t].key for t in contract.CDC_TABLES} == capture_schema.KEYS
    for table, bad in E.BAD_VALUES.items():
        for column, _value in bad:
            SOURCES[table].column(column)  # a corruption of a column the table has


# ----------------------------------------------------------------------------------------------- the generator
# How the contract's types arrive in a JSON row image (sources.md §2): Python types of the parsed JSON value.
JSON_TYPES: dict[str, tuple[type, ...]] = {
    contract.TEXT_NAME: (str,),
    contract.BIGINT_NAME: (int,),
    contract.BOOLEAN_NAME: (bool,),
    contract.DOUBLE_NAME: (float, int),
    contract.NUMERIC_NAME: (str, int, float),  # decimal text, or a JSON number
    contract.TIMESTAMPTZ_NAME: (str, int),  # ISO-8601 text, or epoch microseconds
}


def value_problem(c: contract.SourceColumn, value: Any) -> str | None:
    """What is wrong with ``value`` as a value of column ``c`` in a valid row image, or None."""
    if value is None:
        return None if c.nullable else "null in a column that is not nullable"
    if type(value) not in JSON_TYPES[c.type.name]:
        return f"a JSON {type(value).__name__} for a {c.type} column"
    if c.values and value not in c.values:
        return f"{value!r} is not one of {c.values}"
    if c.type.is_decimal:
        d = Decimal(str(value))
        assert c.type.scale is not None
        if d != d.quantize(Decimal(1).scaleb(-c.type.scale)):
            return f"{value!r} has more than {c.type.scale} decimals"
        if isinstance(value, str) and not re.fullmatch(contract.MONEY_TEXT_RE, value):
            return f"{value!r} is not the decimal text of a {c.type}"
    if c.type.name == contract.TIMESTAMPTZ_NAME and isinstance(value, str):
        if not value.endswith("Z"):
            return f"{value!r} is not an ISO-8601 UTC text"
        datetime.fromisoformat(value)
    return None


def landed_values(root: Path) -> Iterator[tuple[str, dict[str, Any] | None, dict[str, Any] | None, str | None]]:
    """(table, before, after, op) of every landed line that is not a tombstone; op None for pings."""
    for path in sorted((root / "topics").rglob("*.json*")):
        source = bs.TOPIC_BY_NAME[path.relative_to(root / "topics").parts[0]]
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        for line in data.splitlines():
            value = json.loads(line)
            if isinstance(value, dict) and set(value) == {"schema", "payload"}:
                value = value["payload"]
            if value is None:
                continue
            if source.cdc:
                yield source.table, value["before"], value["after"], value["op"]
            else:
                yield source.table, None, value, None


def row_problems(source: contract.SourceTopic, row: dict[str, Any]) -> list[str]:
    """What is wrong with a full row image of ``source`` (contract columns in order, then added ones)."""
    names = list(row)
    n = len(source.columns)
    problems = []
    if tuple(names[:n]) != source.column_names:
        problems.append(f"columns {names} are not the contract's {list(source.column_names)}")
    added = [c.name for c in source.added_columns]
    if any(name not in added for name in names[n:]):
        problems.append(f"columns {names[n:]} are not added columns of the contract ({added})")
    for name, value in row.items():
        if name in names[:n] or name in added:
            problem = value_problem(source.column(name), value)
            if problem:
                problems.append(f"{name}: {problem}")
    return problems


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small landing zone from the real generator: every encoding and case of the golden config, no bad lines."""
    root = tmp_path_factory.mktemp("contract_landing")
    generate(
        root,
        replace(
            GOLDEN_CONFIG,
            malformed_json_rate=0.0,
            invalid_op_rate=0.0,
            missing_key_rate=0.0,
            invalid_value_rate=0.0,
            invalid_envelope_rate=0.0,
        ),
    )
    return root


def test_the_generator_writes_the_contract_columns_with_their_types(generated: Path) -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    problems: Counter[str] = Counter()
    for table, before, after, op in landed_values(generated):
        source = SOURCES[table]
        if after is not None:
            problems.update(f"{table} {op} after: {p}" for p in row_problems(source, after))
            seen[table].update(after)
        elif op != "d":
            problems[f"{table} {op}: no after"] += 1
        if before is not None and set(before) != {source.key}:
            problems.update(f"{table} {op} before: {p}" for p in row_problems(source, before))
        if op == "d" and (before is None or before.get(source.key) is None):
            problems[f"{table}: a delete without its key"] += 1
    assert not problems, "\n".join(f"{p} ({n} lines)" for p, n in problems.most_common(20))
    assert set(seen) == set(SOURCES)
    # Every column occurs, also the column orders gain part way (tip_amount).
    for table, source in SOURCES.items():
        assert seen[table] == {c.name for c in source.columns + source.added_columns}, table


def test_the_generator_schema_blocks_type_every_contract_column(generated: Path) -> None:
    connect = {
        contract.TEXT_NAME: "string",
        contract.BIGINT_NAME: "int64",
        contract.DOUBLE_NAME: "double",
        contract.BOOLEAN_NAME: "boolean",
        contract.NUMERIC_NAME: "string",  # decimal.handling.mode=string
        contract.TIMESTAMPTZ_NAME: "string",  # io.debezium.time.ZonedTimestamp
    }
    for table in contract.CDC_TABLES:
        source = SOURCES[table]
        extra = tuple(c.name for c in source.added_columns)
        schema = json.loads(E.connect_schema(table, extra))
        after = next(f for f in schema["fields"] if f["field"] == "after")
        assert [(f["field"], f["type"]) for f in after["fields"]] == [
            (c.name, connect[c.type.name]) for c in source.columns + source.added_columns
        ], table


# ----------------------------------------------------------------------------------------------- the OLTP database
# information_schema.columns.data_type of each contract type.
PG_TYPES = {
    contract.TEXT_NAME: "text",
    contract.BIGINT_NAME: "bigint",
    contract.BOOLEAN_NAME: "boolean",
    contract.DOUBLE_NAME: "double precision",
    contract.NUMERIC_NAME: "numeric",
    contract.TIMESTAMPTZ_NAME: "timestamp with time zone",
}


@pytest.mark.postgres
def test_the_capture_creates_the_contract_tables(pg_database: str) -> None:
    import psycopg2

    conn = psycopg2.connect(pg_database.replace("+psycopg2", ""))
    try:
        capture_schema.create_schema(conn)
        capture_schema.create_schema(conn)  # idempotent
        with conn.cursor() as cur:
            cur.execute(
                "select table_name, column_name, data_type, numeric_precision, numeric_scale, is_nullable,"
                " column_default from information_schema.columns where table_schema = 'public'"
                " order by table_name, ordinal_position"
            )
            columns: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
            for table, *rest in cur.fetchall():
                columns[table].append(tuple(rest))
            cur.execute(
                "select c.relname, con.contype, pg_get_constraintdef(con.oid) from pg_constraint con"
                " join pg_class c on c.oid = con.conrelid join pg_namespace n on n.oid = c.relnamespace"
                " where n.nspname = 'public' order by 1, 3"
            )
            constraints: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for table, kind, definition in cur.fetchall():
                constraints[table].append((kind, definition))
            cur.execute(
                "select relname, relreplident from pg_class c join pg_namespace n on n.oid = c.relnamespace"
                " where n.nspname = 'public' and relkind = 'r'"
            )
            identity = dict(cur.fetchall())
            cur.execute("select tablename, indexdef from pg_indexes where schemaname = 'public'")
            indexes = defaultdict(list)
            for table, definition in cur.fetchall():
                indexes[table].append(definition)
    finally:
        conn.close()

    assert sorted(columns) == sorted(contract.CDC_TABLES)
    for table in contract.CDC_TABLES:
        source = SOURCES[table]
        assert columns[table] == [
            (
                c.name,
                PG_TYPES[c.type.name],
                c.type.precision if c.type.is_decimal else (64 if c.type == contract.BIGINT else None),
                c.type.scale if c.type.is_decimal else (0 if c.type == contract.BIGINT else None),
                "YES" if c.nullable else "NO",
                c.default,
            )
            for c in source.columns
        ], table
        checks, keys, foreign = {}, [], []
        for kind, definition in constraints[table]:
            if kind == "c":
                column = re.search(r"\(\(?(\w+) = ANY", definition)
                assert column, definition
                checks[column[1]] = tuple(re.findall(r"'([^']*)'::text", definition))
            elif kind == "p":
                keys.append(definition)
            elif kind == "f":
                foreign.append(definition)
        assert checks == {c.name: c.values for c in source.columns if c.values}, table
        assert keys == [f"PRIMARY KEY ({source.key})"], table
        assert foreign == [
            f"FOREIGN KEY ({c.name}) REFERENCES {c.references}({SOURCES[c.references].key})"
            for c in source.columns
            if c.references
        ], table
        assert identity[table] == "d", f"{table}: replica identity is not DEFAULT"
        assert any(d.endswith(f"({capture_schema.UPDATED_AT})") for d in indexes[table]), table


# ----------------------------------------------------------------------------------------------- dbt
def source_tables(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The bronze source tables as dbt's manifest has them (a real ``dbt parse`` when the manifest is stale)."""
    settings = local_settings(tmp_path)
    manifest = json.loads(Path(dbt_project(settings).manifest_path).read_text())
    return {n["name"]: n for n in manifest["sources"].values() if n["source_name"] == "bronze"}


def expected_source_yaml(source: contract.SourceTopic) -> str:
    """The contract columns of a table as ``_sources.yml`` should list them (printed when they differ)."""
    rows = [{"name": c.name, "description": c.doc, "data_type": duck_type(c.type)} for c in source.columns]
    text = yaml.safe_dump(rows, sort_keys=False, width=1000, default_flow_style=None)
    return "\n".join(" " * 10 + line for line in text.splitlines())


def test_dbt_sources_list_the_contract_columns_in_order(tmp_path: Path) -> None:
    tables = source_tables(tmp_path)
    metadata = {t: [c.name for c in bs.metadata_columns(bs.TOPICS[t])] for t in SOURCES}
    for table, source in SOURCES.items():
        assert table in tables, f"_sources.yml has no bronze table {table}"
        listed = [(c["name"], c["description"], c["data_type"]) for c in tables[table]["columns"].values()]
        n = len(source.columns)
        assert listed[:n] == [(c.name, c.doc, duck_type(c.type)) for c in source.columns], (
            f"models/staging/_sources.yml, table {table}: the contract columns should read\n"
            f"{expected_source_yaml(source)}"
        )
        rest = [name for name, _, _ in listed[n:]]
        assert rest == [m for m in metadata[table] if m in rest], f"{table}: {rest} are not its metadata columns"


def test_stg_orders_passes_through_only_columns_beyond_the_contract() -> None:
    sql = (STAGING / "stg_orders.sql").read_text()
    listed = re.search(r"set contract_columns = \[(.*?)\]", sql, re.S)
    assert listed, "stg_orders.sql no longer sets contract_columns"
    assert tuple(re.findall(r"'(\w+)'", listed[1])) == SOURCES["orders"].column_names


@pytest.mark.slow
def test_staging_models_cast_every_contract_column_to_its_type(tmp_path: Path) -> None:
    """``dbt run`` of the staging models on empty bronze tables, then the types DuckDB gives their columns."""
    from logistics_platform.lib import connections as duck

    settings = local_settings(tmp_path)
    run_dbt(settings, ["run", "--select", "path:models/staging"])
    con = duck.connect(settings.duckdb_path, read_only=True)
    try:
        problems = []
        for table, source in SOURCES.items():
            described = {r[0]: r[1].lower() for r in con.sql(f"describe staging.stg_{table}").fetchall()}
            for c in source.columns:
                got, want = described.get(c.name), duck_type(c.type)
                if got != want:
                    problems.append(f"stg_{table}.{c.name}: {got}, the contract says {c.type} ({want})")
    finally:
        con.close()
    assert not problems, "\n".join(problems)
