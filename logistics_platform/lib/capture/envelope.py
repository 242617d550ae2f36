"""Rows of the OLTP database -> Debezium change events as the landing contract carries them (docs/capture.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from logistics_platform.lib.capture.pgoutput import UNCHANGED_TOAST, Value

CONNECTOR_VERSION = "logistics-capture-1"
SERVER_NAME = "oltp"
TOPIC_PREFIX = "oltp.public."

# PostgreSQL type oids whose text output is converted (everything else stays text): int2/4/8, numeric, bool,
# float4/8; timestamptz and timestamp below.
CONVERTERS: dict[int, Callable[[str], Any]] = {20: int, 21: int, 23: int, 1700: Decimal, 700: float, 701: float}
CONVERTERS[16] = "t".__eq__  # bool: PostgreSQL writes t or f
TIMESTAMPTZ_OID, TIMESTAMP_OID = 1184, 1114
_UTC_TEXT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?\+00$")

# What the real connector sends for a TOASTed value an update left unchanged (its default
# ``unavailable.value.placeholder``); downstream keeps the column's previous value (docs/contract/sources.md).
UNAVAILABLE_VALUE = "__debezium_unavailable_value"


def topic_of(table: str) -> str:
    return TOPIC_PREFIX + table


def from_text(type_oid: int, text: str | None) -> Any:
    """A Python value of PostgreSQL's text output of one column (the replication connection runs in UTC/ISO)."""
    if text is None:
        return None
    convert = CONVERTERS.get(type_oid)
    if convert is not None:
        return convert(text)
    if type_oid == TIMESTAMPTZ_OID and _UTC_TEXT.match(text):
        # The session runs in UTC/ISO: '2026-11-02 10:15:30.5+00' -> the contract's text without a datetime.
        date_time, _, frac = text[:-3].partition(".")
        return f"{date_time[:10]}T{date_time[11:]}.{frac.ljust(6, '0')}Z"
    if type_oid in (TIMESTAMPTZ_OID, TIMESTAMP_OID):
        value = datetime.fromisoformat(text)
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return text


def row_from_tuple(names: Sequence[str], oids: Sequence[int], values: Sequence[Value]) -> dict[str, Any]:
    """Column name -> Python value of one decoded tuple; an unchanged TOASTed value becomes the placeholder."""
    out: dict[str, Any] = {}
    for name, oid, v in zip(names, oids, values, strict=True):
        out[name] = UNAVAILABLE_VALUE if v is UNCHANGED_TOAST else from_text(oid, v)  # type: ignore[arg-type]
    return out


def to_json_value(value: Any) -> Any:
    """A datetime as ``2026-11-02T10:15:30.123456Z`` (naive is UTC), a Decimal as its string, the rest as is."""
    if isinstance(value, datetime):
        return (value.astimezone(UTC) if value.tzinfo else value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return str(value) if isinstance(value, Decimal) else value


SEP = (",", ":")


def change_event(
    table: str,
    op: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    *,
    lsn: int,
    sequence_lsn: int | None,
    commit_us: int,
    tx_id: int | None,
    processed_us: int,
    db: str,
    snapshot: str = "false",
) -> str:
    """One Debezium envelope (``schemas.enable=false``) as a compact JSON line, its fields in the connector's order."""
    event = {
        "before": before,
        "after": after,
        "source": {
            "version": CONNECTOR_VERSION,
            "connector": "postgresql",
            "name": SERVER_NAME,
            "ts_ms": commit_us // 1000,
            "snapshot": snapshot,
            "db": db,
            "sequence": json.dumps([None if sequence_lsn is None else str(sequence_lsn), str(lsn)], separators=SEP),
            "ts_us": commit_us,
            "ts_ns": commit_us * 1000,
            "schema": "public",
            "table": table,
            "txId": tx_id,
            "lsn": lsn,
            "xmin": None,
            "origin": None,
            "origin_lsn": None,
        },
        "transaction": None,
        "op": op,
        "ts_ms": processed_us // 1000,
        "ts_us": processed_us,
        "ts_ns": processed_us * 1000,
    }
    # json calls to_json_value for what it cannot encode itself: the rows' datetimes and Decimals
    return json.dumps(event, separators=SEP, ensure_ascii=False, default=to_json_value)


TOMBSTONE = "null"


def lines_of(table: str, op: str, event: str) -> list[str]:
    """The landed lines of one change: a delete is followed by its Kafka tombstone."""
    return [event, TOMBSTONE] if op == "d" else [event]
