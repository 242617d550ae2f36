"""The OLTP database of the source contract (:mod:`logistics_platform.lib.contract`): DDL and the publication."""

from __future__ import annotations

from typing import Any

from logistics_platform.lib import contract

SCHEMA = "public"
# The column the query-based capture polls by.
UPDATED_AT = "updated_at"
# Contract order of columns per table (lib/contract.py); the key is first.
TABLES: dict[str, tuple[str, ...]] = {t: contract.SOURCES[t].column_names for t in contract.CDC_TABLES}
KEYS: dict[str, str] = {t: contract.SOURCES[t].key for t in contract.CDC_TABLES}

_PG_TYPES = {contract.DOUBLE_NAME: "double precision"}


def column_ddl(source: contract.SourceTopic, c: contract.SourceColumn) -> str:
    """One column of a ``create table``: type, key or not null, foreign key, allowed values, default."""
    t = c.type
    parts = [c.name, f"numeric({t.precision}, {t.scale})" if t.is_decimal else _PG_TYPES.get(t.name, t.name)]
    if c.name == source.key:
        parts.append("primary key")
    elif not c.nullable:
        parts.append("not null")
    if c.references:
        parts.append(f"references {c.references} ({contract.SOURCES[c.references].key})")
    if c.values:
        literals = ", ".join("'" + v.replace("'", "''") + "'" for v in c.values)
        parts.append(f"check ({c.name} in ({literals}))")
    if c.default:
        parts.append(f"default {c.default}")
    return " ".join(parts)


def table_ddl(table: str) -> str:
    """``create table if not exists`` of one contract table."""
    source = contract.SOURCES[table]
    columns = ",\n".join(f"    {column_ddl(source, c)}" for c in source.columns)
    return f"create table if not exists {table} (\n{columns}\n);\n"


def create_schema(conn: Any) -> None:
    """Create the contract's tables, the query mode's ``updated_at`` indexes and REPLICA IDENTITY DEFAULT (the key)
    in the OLTP database when they are missing (idempotent), and commit."""
    tables = "".join(table_ddl(t) for t in TABLES)
    # The query-based capture polls by updated_at: without these it scans every table on every poll.
    indexes = "".join(
        f"create index if not exists {t}_{UPDATED_AT} on {t} ({UPDATED_AT});\n"
        for t, cols in TABLES.items()
        if UPDATED_AT in cols
    )
    identity = "".join(f"alter table {t} replica identity default;\n" for t in TABLES)
    with conn.cursor() as cur:
        cur.execute(tables + indexes + identity)
    conn.commit()


def ensure_publication(conn: Any, publication: str) -> bool:
    """Create ``publication`` for the contract's tables unless it exists; True when it was created."""
    with conn.cursor() as cur:
        cur.execute("select 1 from pg_publication where pubname = %s", (publication,))
        if cur.fetchone():
            return False
        tables = ", ".join(f"{SCHEMA}.{t}" for t in TABLES)
        cur.execute(f'create publication "{publication}" for table {tables}')
    conn.commit()
    return True
