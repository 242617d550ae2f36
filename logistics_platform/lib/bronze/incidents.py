"""Schema incidents: lines of a type their bronze column cannot take, or without a contract column the source renamed
(reason ``incompatible_type``), and the ways out: the column accepted as text, or the source's new name read as the
contract column, then the hours it touched replayed (docs/operations.md, "Schema incidents")."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.expressions import And, EqualTo, NotNull
from pyiceberg.types import DecimalType, IcebergType, StringType

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze import values as bv
from logistics_platform.lib.bronze.landing import parse_landing_path

ACCEPTED = "logistics.accepted-type."  # table property + column: the type an operator accepted (read by the ingest)
REPLAY = "logistics.replay-hours."  # table property + column: the hours an acceptance still has to re-ingest
RENAMED = "logistics.renamed."  # table property + the source's new column name: the contract column it carries
RENAMED_TO = "renamed to "  # the new type of a rename incident: the contract column is gone, a new one came
_DECLARED = {**dict.fromkeys(("int8", "int16", "int32", "int"), "int"), "int64": "long", "float32": "float"}
_DECLARED |= {t: t for t in ("long", "float", "double", "boolean", "string")} | {"float64": "double", "bytes": "binary"}
# The declared types each column kind reads (Debezium's encodings of it): a value of these is bad, not a new type.
_READS = {bv.K_LONG: {"int", "long"}, bv.K_BOOL: {"boolean"}, bv.K_STRING: {"string"}}
_READS |= {bv.K_DOUBLE: {"int", "long", "float", "double"}, bv.K_TIMESTAMP: {"string", "int", "long"}}
_READS[bv.K_DECIMAL] = {"string", "double", "binary"}


def declared_type(schema: Any, column: str) -> str | None:
    """``column``'s type in Iceberg's words in a line's JsonConverter schema block (CDC: its ``after``); else None."""
    try:
        after = next((f for f in schema["fields"] if f.get("field") == "after"), schema)
        field = next(f for f in after["fields"] if f.get("field") == column)
        params = field.get("parameters") or {}
        if field.get("name") == bv.CONNECT_DECIMAL:
            return f"decimal({params.get('connect.decimal.precision', '?')}, {params['scale']})"
        return _DECLARED.get(field.get("type"))
    except (KeyError, TypeError, AttributeError, StopIteration):
        return None


def type_change(column: IcebergType, value: Any, declared: str | None, evolved: bool) -> str | None:
    """``old -> new`` when a value the column rejected comes from a type change the column cannot take: the line's
    declared type, else (a column outside the contract, typed from its first value) the value's; None: a bad value."""
    new = declared or (str(bv.infer_iceberg_type(value)) if evolved else None)  # as the column was typed
    if new is None or (isinstance(column, DecimalType) and new.endswith(f", {column.scale})")):
        return None  # a bad value; a decimal of the same scale (a wider precision is a promotion, not an incident)
    return None if new in _READS.get(bv.kind_of(column), {new}) else f"{column} -> {new}"


def note_incident(incidents: dict[str, dict[str, Any]], row: tuple[Any, ...]) -> None:
    """Count a quarantine row of an incompatible type, keep its column's first position and ``old -> new`` types."""
    reason, offset, path = row[5], row[2], row[3]
    if reason.startswith(bs.REASON_INCOMPATIBLE_TYPE):
        seen = incidents.setdefault(reason[len(bs.REASON_INCOMPATIBLE_TYPE) + 1 :], {"lines": 0})
        seen["lines"] += 1
        if "file" not in seen or (path, offset) < (seen["file"], seen["offset"]):
            old, new = row[6].split(": ", 1)[1].split("; ", 1)[0].split(" -> ", 1)  # the line parser's detail
            line = offset - parse_landing_path(path)[3] + 1  # the file's first line has its start offset
            seen.update(old_type=old, new_type=new, file=path, line=line, offset=offset)


def describe(table: str, column: str, incident: Mapping[str, Any]) -> str:
    """The schema incident check's words for one column: what changed, where first, what to do."""
    i = incident
    if i["new_type"].startswith(RENAMED_TO):
        new = i["new_type"][len(RENAMED_TO) :]
        what = f"is missing from the source's rows, which carry a new column {new} instead (renamed, or dropped)"
        way = f"the new name read as the column: `logistics-platform run --accept-rename {table}.{column}={new}`"
    else:
        what = f"changed type {i['old_type']} -> {i['new_type']}, which Iceberg cannot promote"
        way = f"a column added by schema evolution: `logistics-platform run --accept-type {table}.{column}`"
    return (
        f"schema incident: bronze.{table}.{column} {what}; {i['lines']} lines quarantined "
        f"({bs.REASON_INCOMPATIBLE_TYPE}:{column}), the first at {i['file']} line {i['line']} (offset {i['offset']}); "
        f"the way out ({way}): docs/operations.md, Schema incidents"
    )


def _topic(table: str) -> bs.TopicSpec:
    """The contract topic of bronze ``table``; a one-line error naming the tables otherwise."""
    spec = bs.TOPICS.get(table)
    if spec is None:
        raise ValueError(f"no bronze table {table!r}: expected one of {', '.join(bs.TOPICS)}")
    return spec


def _unfinished(properties: Mapping[str, str], column: str) -> list[datetime] | None:
    """The hours an acceptance of ``column`` recorded and has not replayed yet (None: none pending)."""
    if REPLAY + column not in properties:
        return None
    return [datetime.fromisoformat(h) for h in properties[REPLAY + column].split(",") if h]


def _quarantined_hours(catalog: Catalog, spec: bs.TopicSpec, column: str) -> set[datetime]:
    """The arrival hours holding lines of ``spec``'s topic quarantined as an incident of ``column``."""
    reason = And(EqualTo("_topic", spec.topic), EqualTo("reason", f"{bs.REASON_INCOMPATIBLE_TYPE}:{column}"))
    quarantine = catalog.load_table(f"{bs.NAMESPACE}.{bs.QUARANTINE_TABLE}")
    return set(quarantine.scan(reason, ("_arrival_hour",)).to_arrow()[0].to_pylist())


def accept_as_text(catalog: Catalog, table: str, column: str) -> list[datetime]:
    """Make ``column`` of bronze ``table`` text (dropped and added again: Iceberg promotes nothing to text), with the
    acceptance and the hours to replay as table properties, in one commit; returns those hours: those quarantining
    the new type, and those holding old values (bronze stays what a rebuild from the landing zone gives)."""
    spec = _topic(table)
    fixed = {c.name for c in (*spec.columns, *bs.metadata_columns(spec))}
    if column in fixed:
        raise ValueError(
            f"bronze.{table}.{column} is a contract column: its type changes only with the contract (lib/contract.py, "
            "docs/contract/sources.md); have the source change reverted (docs/operations.md, Schema incidents)"
        )
    live = catalog.load_table(spec.identifier)
    if (pending := _unfinished(live.properties, column)) is not None:
        return pending
    fields = {f.name: f.field_type for f in live.schema().fields if f.name not in fixed}
    if not isinstance(fields.get(column), IcebergType) or isinstance(fields[column], StringType):
        raise ValueError(
            f"bronze.{table} has no column {column!r} of another type than text to accept (its added columns: "
            f"{', '.join(fields) or 'none'}); name the column the schema_incident check names"
        )
    hours = _quarantined_hours(catalog, spec, column)
    hours |= set(live.scan(NotNull(column), ("_arrival_hour",)).to_arrow()[0].to_pylist())
    with live.transaction() as tx:
        with tx.update_schema() as update:
            update.delete_column(column)
            update.add_column(column, StringType(), doc=f"Accepted as text (was {fields[column]}).")
        replay = ",".join(h.isoformat() for h in sorted(hours))
        tx.set_properties({ACCEPTED + column: "string", REPLAY + column: replay})
    return sorted(hours)


def accept_rename(catalog: Catalog, table: str, column: str, new: str) -> list[datetime]:
    """Have the ingest read the source's column ``new`` as contract column ``column`` of bronze ``table`` (a table
    property), with the hours to replay in the same commit; returns those hours: those quarantining the rename."""
    spec = _topic(table)
    if column not in {c.name for c in spec.columns} or column == spec.key:
        raise ValueError(
            f"bronze.{table}.{column} is not a contract column a rename can map (the key cannot be renamed): "
            f"name the column the schema_incident check names, as {table}.COLUMN=NEW"
        )
    live = catalog.load_table(spec.identifier)
    if (pending := _unfinished(live.properties, column)) is not None:
        return pending
    if not new.strip() or new.lower() in {f.name.lower() for f in live.schema().fields}:
        raise ValueError(
            f"{new!r} cannot be read as bronze.{table}.{column}: empty or already a column of bronze.{table}; "
            "name the new column the schema_incident check names"
        )
    hours = sorted(_quarantined_hours(catalog, spec, column))
    if not hours:
        raise ValueError(
            f"no line of bronze.{table} is quarantined as {bs.REASON_INCOMPATIBLE_TYPE}:{column}: there is no rename "
            "to accept; run `logistics-platform run` and name what the schema_incident check names"
        )
    with live.transaction() as tx:
        tx.set_properties({RENAMED + new: column, REPLAY + column: ",".join(h.isoformat() for h in hours)})
    return hours


def renames_of(properties: Mapping[str, str]) -> dict[str, str]:
    """The accepted renames in a bronze table's properties: the source's column -> the contract column it carries."""
    return {k[len(RENAMED) :]: v for k, v in properties.items() if k.startswith(RENAMED)}


def replayed(catalog: Catalog, table: str, column: str) -> None:
    """Record that the acceptance's hours were re-ingested."""
    with catalog.load_table(bs.TOPICS[table].identifier).transaction() as tx:
        tx.remove_properties(REPLAY + column)


def carry_accepted(live: Catalog, staged: Catalog) -> None:
    """Copy the accepted types and renames of the live bronze tables onto the staged ones of a rebuild (operator
    decisions)."""
    from logistics_platform.lib.bronze.tables import ensure_bronze_tables

    for name, table in ensure_bronze_tables(staged).items():
        ident = f"{bs.NAMESPACE}.{name}"
        props = live.load_table(ident).properties if live.table_exists(ident) else {}
        if accepted := {k: v for k, v in props.items() if k.startswith((ACCEPTED, RENAMED))}:
            table.transaction().set_properties(accepted).commit_transaction()
