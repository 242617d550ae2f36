"""One landed line -> a typed bronze row or a quarantine verdict: the source of truth of every parse path.

Pure (no clock, no run id): bronze is reproducible from the landing files alone. The quarantine reasons are those of
docs/contract/sources.md. A row is a list in table column order with the extras dict (columns the table lacks, or
None) last. Hot path: once per landed line.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from math import isfinite
from typing import Any

from pyiceberg.types import DecimalType, IcebergType

from logistics_platform.lib.bronze.incidents import RENAMED_TO, declared_type, type_change
from logistics_platform.lib.bronze.schema import (
    REASON_INCOMPATIBLE_TYPE,
    REASON_INVALID_ENVELOPE,
    REASON_INVALID_OP,
    REASON_INVALID_VALUE,
    REASON_MALFORMED_JSON,
    REASON_MISSING_KEY,
    TopicSpec,
    metadata_columns,
)
from logistics_platform.lib.bronze.values import (
    DECIMAL_MODE_SETTING,
    DECIMAL_MODES,
    DECIMAL_PRECISE,
    I53,
    I64,
    K_DECIMAL,
    K_DOUBLE,
    K_LONG,
    K_STRING,
    K_TEXT_OR_JSON,
    K_TIMESTAMP,
    MONEY_DECIMAL,
    BadValue,
    connect_types,
    convert,
    decode_decimal,
    event_id,
    infer_iceberg_type,
    kind_of,
    money_text_match,
    parse_timestamp_micros,
    promotion,
    promotions,
    schema_encodings,
)
from logistics_platform.lib.timekeys import epoch_micros

CDC_OPS = frozenset(("c", "u", "d", "r", "t"))
PLAIN_EVENT_TIME_COLUMN = "recorded_at"  # the event time of the non-CDC topic (pings: device clock)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A line that goes to bronze.quarantine: the reason (docs/contract/sources.md) and what exactly was wrong."""

    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Widen:
    """A line that holds a column's value (or declares its type) wider than the column: the columns to promote."""

    types: dict[str, IcebergType]


class _Tombstone:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TOMBSTONE"


TOMBSTONE = _Tombstone()
"""Result for a Kafka tombstone line: counted, never stored."""

ParseResult = list[Any] | Rejected | Widen | _Tombstone


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# NaN/Infinity are not JSON; Python's json accepts them unless told otherwise. The C scanner is called
# directly: json.loads would build a decoder per call and wrap the scan in two Python frames.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_scan_once = _DECODER.scan_once  # type: ignore[attr-defined]  # set by the C decoder, not in typeshed
_JSON_WS = " \t\n\r"


def _loads(text: str) -> Any:
    s = text.strip(_JSON_WS)
    try:
        value, end = _scan_once(s, 0)
    except StopIteration as e:
        raise ValueError(f"expecting a JSON value at char {e.value}") from None
    if end != len(s):
        raise ValueError(f"extra data after the JSON value at char {end}")
    return value


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def raw_line_text(raw: bytes) -> tuple[str, str]:
    """(text, encoding) to store a landed line: the text when it is UTF-8, else base64."""
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), "base64"


class LineParser:
    """Parses lines of one topic landed in one arrival hour (``evolved``: columns added beyond the contract)."""

    def __init__(
        self,
        spec: TopicSpec,
        arrival_hour: datetime,
        allowed_lateness_seconds: int,
        evolved: dict[str, IcebergType] | None = None,
        decimal_mode: str = DECIMAL_PRECISE,
        renames: dict[str, str] | None = None,
    ) -> None:
        if decimal_mode not in DECIMAL_MODES:
            raise ValueError(f"{DECIMAL_MODE_SETTING}={decimal_mode!r}: expected one of {', '.join(DECIMAL_MODES)}")
        self.decimal_mode = decimal_mode
        # Renames an operator accepted (a source column -> the contract column it now carries): read under the old name.
        self.renames = dict(renames or {})
        # ``evolved`` also holds the contract columns the table promoted: they keep their place, with their new type.
        self.evolved = dict(evolved or {})
        self.types = {c.name: self.evolved.pop(c.name, c.type) for c in spec.columns}
        contract = [(c.name, kind_of(t)) for c, t in zip(spec.columns, self.types.values(), strict=True)]
        self.types |= self.evolved
        # Each decimal column's scale: that of a Connect Decimal when the line has no schema block.
        self.scales = {n: t.scale for n, t in self.types.items() if isinstance(t, DecimalType)}
        # Decimal columns that hold every canonical money text as it is: DECIMAL(12,2) or a promotion of it.
        self._money = {n for n, t in self.types.items() if t == MONEY_DECIMAL or promotion(MONEY_DECIMAL, t)}
        self._line_schema: dict[str, tuple[str, int | None]] | None = None  # the current line's schema_encodings
        self.topic = spec.topic
        self.arrival_us = epoch_micros(arrival_hour)
        self.late_before_us = self.arrival_us - allowed_lateness_seconds * 1_000_000
        self.evolved_kinds = [(n, kind_of(t, evolved=True)) for n, t in self.evolved.items()]
        self.columns: list[tuple[str, str]] = contract + self.evolved_kinds
        self.known = frozenset(n for n, _ in self.columns)
        # Names an added column must not take, case-insensitively (DuckDB and dbt fold case).
        self.taken = frozenset(n.lower() for n in (*self.known, *(c.name for c in metadata_columns(spec))))
        self.key = spec.key
        self.value_columns = [(n, k) for n, k in contract if n != spec.key]
        # Table order: contract columns, metadata columns, then columns added by schema evolution.
        self.column_names: tuple[str, ...] = (
            tuple(n for n, _ in contract) + tuple(c.name for c in metadata_columns(spec)) + tuple(self.evolved)
        )
        self._n_evolved = len(self.evolved_kinds)
        self.cdc = spec.cdc
        if spec.key and spec.columns[0].name != spec.key:
            raise ValueError(f"{spec.table}: the key column must come first in the contract")
        self.key_kind = kind_of(spec.columns[0].type) if spec.key else K_TEXT_OR_JSON
        self._event_time_index = 0 if spec.cdc else [n for n, _ in self.columns].index(PLAIN_EVENT_TIME_COLUMN)

    # -- public ---------------------------------------------------------------------------------------------
    def parse(self, raw: bytes, kafka_partition: int, offset: int, source_file: str) -> ParseResult:
        """One line -> row list (table order + extras dict), :class:`Rejected`, or :data:`TOMBSTONE`."""
        try:
            value = _loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            return Rejected(REASON_MALFORMED_JSON, f"not UTF-8: {e.reason} at byte {e.start}")
        except ValueError as e:
            return Rejected(REASON_MALFORMED_JSON, f"not JSON: {e}")
        except RecursionError:
            return Rejected(REASON_MALFORMED_JSON, "not JSON: nested too deeply")
        if (b"\\ud" in raw or b"\\uD" in raw) and not _encodable(value):
            # "\ud800" alone is accepted by the json module but is no text: it could not be stored.
            return Rejected(REASON_MALFORMED_JSON, "not JSON text: unpaired UTF-16 surrogate escape")
        self._line_schema = self._schema = None  # the current line's schema_encodings and schema block
        if type(value) is dict and "payload" in value and len(value) == 2 and "schema" in value:
            self._schema = value["schema"]
            schema = schema_encodings(self._schema)
            if schema is not None:
                self._line_schema = self._renamed(schema[0]) if self.renames else schema[0]
                wider = promotions(self.types, schema[1])
                if wider:  # the record declares a type its column is promoted to (connect.decimal.precision...)
                    return Widen(wider)
            value = value["payload"]
        if value is None:
            return TOMBSTONE
        if type(value) is not dict:
            return Rejected(REASON_INVALID_ENVELOPE, f"expected a JSON object, got {type(value).__name__}")
        return (self._cdc if self.cdc else self._plain)(value, kafka_partition, offset, source_file)

    def row_dict(self, row: list[Any]) -> dict[str, Any]:
        """Column name -> value for a row (extras merged in under their own names)."""
        return dict(zip(self.column_names, row[:-1], strict=True)) | (row[-1] or {})

    # -- internals ------------------------------------------------------------------------------------------
    def _renamed(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with the source's names of accepted renames replaced by the contract's."""
        return {self.renames.get(k, k): v for k, v in data.items()}

    def _metadata(self, partition: int, offset: int, source_file: str, event: str, event_us: int) -> tuple[Any, ...]:
        """A row's address and event columns (``event``: its event id), in table order."""
        gap = self.arrival_us - event_us
        late, lateness = event_us < self.late_before_us, (gap // 1_000_000 if gap > 0 else 0)
        return (self.topic, partition, offset, source_file, event, event_us, self.arrival_us, late, lateness)

    def _values(self, data: dict[str, Any], out: list[Any], columns: list[tuple[str, str]]) -> Rejected | Widen | None:
        # Inline fast paths for the common encodings; everything else (and every error) goes through convert().
        get = data.get
        append = out.append
        for name, kind in columns:
            v = get(name)
            if v is None:
                append(None)
                continue
            t = type(v)
            if t is str:
                if kind is K_STRING or kind is K_TEXT_OR_JSON:
                    append(v)
                    continue
                if kind is K_DECIMAL and money_text_match(v) is not None and name in self._money:
                    append(Decimal(v))  # already exactly 2 decimal places within 10 integer digits
                    continue
            elif t is int:
                if kind is K_LONG and -I64 <= v < I64:
                    append(v)
                    continue
            elif t is float and kind is K_DOUBLE and isfinite(v):
                append(v)
                continue
            try:
                if kind is K_DECIMAL:
                    append(self._decimal(name, v))
                elif kind is K_TIMESTAMP and t is int and self._line_schema is not None and name in self._line_schema:
                    append(self._int_timestamp(v, self._line_schema[name]))
                else:
                    append(convert(kind, v))
            except BadValue as e:  # a bad value, one of a type the column can be promoted to, or a schema incident
                if e.to is not None:
                    return Widen({name: e.to})
                change = type_change(self.types[name], v, declared_type(self._schema, name), name in self.evolved)
                if change is None:
                    return Rejected(f"{REASON_INVALID_VALUE}:{name}", f"{name}: {e.detail}")
                return Rejected(f"{REASON_INCOMPATIBLE_TYPE}:{name}", f"{name}: {change}; {e.detail}")
        return None

    def _decimal(self, name: str, value: Any) -> Decimal:
        column = self.types[name]
        assert isinstance(column, DecimalType)  # the kind of a decimal column only
        encoding = None if self._line_schema is None else self._line_schema.get(name)
        if encoding is None or encoding[0] != "decimal":
            return decode_decimal(value, self.decimal_mode, column.scale, column)
        if encoding[1] is None:  # the schema says a string or number: no base64
            return decode_decimal(value, self.decimal_mode, None, column)
        return decode_decimal(value, DECIMAL_PRECISE, encoding[1], column)

    @staticmethod
    def _int_timestamp(value: int, encoding: tuple[str, int | None]) -> int:
        unit = encoding[1]
        if encoding[0] != "timestamp" or unit == 1:
            return parse_timestamp_micros(value)
        return parse_timestamp_micros(value // 1000 if unit == 0 else value * (unit or 1))

    def _key(self, data: Any) -> Any:
        if type(data) is not dict:
            raise BadValue(f"no {self.key or 'row'}: row image is {type(data).__name__}")
        if not self.key:  # outside the contract: the row image is the key of the event identity
            return json.dumps(data, sort_keys=True, separators=(",", ":"))
        k = data.get(self.key)
        if k is None:
            raise BadValue(f"{self.key} is missing or null")
        t = type(k)
        if self.key_kind == K_LONG:
            if t is not int or not -I64 <= k < I64:
                raise BadValue(f"{self.key} must be a 64-bit integer, got {k!r}")
        elif t is not str or not k:
            raise BadValue(f"{self.key} must be a non-empty string, got {k!r}")
        return k

    def _extras(self, data: dict[str, Any]) -> dict[str, Any] | Rejected | None:
        if data.keys() <= self.known:
            return None
        typed = not self.key and self._schema is not None  # outside the contract: schema-typed null columns too
        extras = {k: v for k, v in data.items() if k not in self.known and (v is not None or typed)}
        clash = [k for k in extras if k.lower() in self.taken or not k.strip()]
        if not clash and len({k.lower() for k in extras}) != len(extras):
            clash = sorted(extras)
        if clash:
            return Rejected(
                REASON_INVALID_ENVELOPE,
                f"row column {clash[0]!r} cannot be added: empty, or equal to a bronze column but for case "
                "(SQL readers fold case), or reserved for bronze metadata",
            )
        if extras and self.key and (gone := [n for n, _ in self.value_columns if n not in data]):
            # A contract column absent from a full row image that has a new column: renamed (or dropped and another
            # added). Stored, the row would lose the column's value: a schema incident, whole in quarantine.
            old, new = gone[0], next(iter(extras))
            detail = f"{old}: {self.types[old]} -> {RENAMED_TO}{new}; the row has no {old} but a new column {new}"
            return Rejected(f"{REASON_INCOMPATIBLE_TYPE}:{old}", detail)
        if extras and not self.key:  # their types: the schema block's, else the values' (timestamps too)
            declared = connect_types(self._schema)
            extras = {k: declared.get(k) or infer_iceberg_type(v, True) for k, v in extras.items()}
        return extras or None

    def _cdc(self, env: dict[str, Any], kafka_partition: int, offset: int, source_file: str) -> ParseResult:
        op = env.get("op")
        if type(op) is not str or op not in CDC_OPS:
            return Rejected(REASON_INVALID_OP, f"op {op!r} is not one of c, u, d, r, t")
        source = env.get("source")
        if type(source) is not dict:
            return Rejected(REASON_INVALID_ENVELOPE, "source is missing")
        lsn = source.get("lsn")
        ts_ms = source.get("ts_ms")
        if type(lsn) is not int:
            return Rejected(REASON_INVALID_ENVELOPE, f"source.lsn must be an integer, got {lsn!r}")
        if type(ts_ms) is not int:
            return Rejected(REASON_INVALID_ENVELOPE, f"source.ts_ms must be an integer, got {ts_ms!r}")
        if not (-I64 <= lsn < I64 and -I53 <= ts_ms < I53):
            return Rejected(REASON_INVALID_ENVELOPE, f"source.lsn {lsn} or source.ts_ms {ts_ms} out of range")
        out: list[Any] = []
        extras = None
        if op in ("t", "d"):  # a delete carries only its key; a TRUNCATE of the whole table no key, no row image
            try:
                key = None if op == "t" else self._key(env.get("before"))
            except BadValue as e:
                return Rejected(REASON_MISSING_KEY, f"delete: {e.detail}")
            out.append(key)
            out += [None] * len(self.value_columns)
        else:
            after = env.get("after")
            if type(after) is not dict:
                return Rejected(REASON_INVALID_ENVELOPE, f"after is missing for op {op!r}")
            if self.renames:
                after = self._renamed(after)
            try:
                key = self._key(after)
            except BadValue as e:
                return Rejected(REASON_MISSING_KEY, e.detail)
            out.append(key)  # the key is the first column of every topic
            bad = self._values(after, out, self.value_columns)
            if bad is not None:
                return bad
            extras = self._extras(after)
            if type(extras) is Rejected:
                return extras
        tx_id = source.get("txId")
        conn_ts = env.get("ts_ms")
        out += (
            *self._metadata(kafka_partition, offset, source_file, event_id(self.topic, key, lsn, op), ts_ms * 1000),
            op,
            lsn,
            tx_id if type(tx_id) is int and -I64 <= tx_id < I64 else None,
            conn_ts * 1000 if type(conn_ts) is int and -I53 <= conn_ts < I53 else None,
        )
        if op == "d" and not self.key:  # outside the contract a delete keeps its before image (its key is all it says)
            after, extras = env["before"], self._extras(env["before"])
            if type(extras) is Rejected:
                return extras
        if self._n_evolved:
            if op == "t" or (op == "d" and self.key):
                out += [None] * self._n_evolved
            else:
                bad = self._values(after, out, self.evolved_kinds)  # type: ignore[arg-type]  # checked above
                if bad is not None:
                    return bad
        if not self.key:
            del out[0]  # no key column outside the contract (the row image was the key of the identity)
        out.append(extras)
        return out

    def _plain(self, obj: dict[str, Any], kafka_partition: int, offset: int, source_file: str) -> ParseResult:
        if self.renames:
            obj = self._renamed(obj)
        try:
            key = self._key(obj)
        except BadValue as e:
            return Rejected(REASON_MISSING_KEY, e.detail)
        out: list[Any] = [key]
        bad = self._values(obj, out, self.value_columns)
        if bad is not None:
            return bad
        event_us = out[self._event_time_index]
        if event_us is None:
            return Rejected(f"{REASON_INVALID_VALUE}:{PLAIN_EVENT_TIME_COLUMN}", "event time is missing")
        out += self._metadata(kafka_partition, offset, source_file, event_id(self.topic, key), event_us)
        if self._n_evolved:
            bad = self._values(obj, out, self.evolved_kinds)
            if bad is not None:
                return bad
        extras = self._extras(obj)
        if type(extras) is Rejected:
            return extras
        out.append(extras)
        return out
