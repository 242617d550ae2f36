"""Vectorised clean path of the bronze line parser: a run of lines decoded and typed by Arrow at C speed.

:class:`~logistics_platform.lib.bronze.envelope.LineParser` stays the source of truth. :func:`fast_rows` only
answers for a run of lines when it can prove that every line of it would have been accepted by the per-line
path with exactly these values; otherwise it returns ``None`` and the caller parses the run line by line.
It declines on anything out of the ordinary: not UTF-8, a line that is not exactly one ``{...}`` object,
a field the explicit schema does not declare (extra row columns, schema/payload envelopes, tombstones),
a value of another JSON type than the column's, duplicate keys, NaN/Infinity, missing or null keys, a bad op,
missing ``source.lsn``/``source.ts_ms`` or values out of range, and any timestamp or decimal that is not in
the canonical form the connector writes (ISO-8601 with ``Z``, ``-?d{1,10}.dd``). Columns added by schema
evolution are read like contract columns (evolved string columns only when every value is a JSON string).
:mod:`~logistics_platform.lib.bronze.isolate` uses these parts to take a block but for its odd lines.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from logistics_platform.lib.bronze.envelope import (
    IDENTITY_SEPARATOR,
    PLAIN_EVENT_TIME_COLUMN,
    LineParser,
    identity_hasher,
)
from logistics_platform.lib.bronze.values import (
    DECIMAL_PRECISE,
    K_BOOL,
    K_DECIMAL,
    K_DOUBLE,
    K_LONG,
    K_STRING,
    K_TEXT_OR_JSON,
    K_TIMESTAMP,
    connect_decimal_unscaled,
)
from logistics_platform.lib.contract import MONEY_PRECISION, MONEY_SCALE, MONEY_TEXT_RE

# An evolved string column (K_TEXT_OR_JSON) also takes other JSON values as text per line: read strictly as a
# string here, any other value makes Arrow fail and the run go line by line.
_JSON_TYPE = {
    K_STRING: pa.string(),
    K_TEXT_OR_JSON: pa.string(),
    K_LONG: pa.int64(),
    K_DOUBLE: pa.float64(),
    K_BOOL: pa.bool_(),
}
# Read as text, then checked against the canonical form before any cast (the per-line path accepts more).
TEXT_KINDS = (K_DECIMAL, K_TIMESTAMP)
MONEY_RE = f"^{MONEY_TEXT_RE}$"
TIMESTAMP_RE = (
    r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{6})?Z$"
)
_TS_UTC = pa.timestamp("us", "UTC")
# TIMESTAMP_RE position by position, for the two lengths it allows: the lowest and the highest byte at each position
# (the day, month and hour are then checked as numbers).
_TS_BOUNDS = {
    len(low): (
        np.frombuffer(low.encode(), np.uint8),
        np.frombuffer(high.encode(), np.uint8) - np.frombuffer(low.encode(), np.uint8),
    )
    for low, high in (
        ("1000-00-00T00:00:00.000000Z", "9999-19-39T29:59:59.999999Z"),
        ("1000-00-00T00:00:00Z", "9999-19-39T29:59:59Z"),
    )
}
_HASHER = identity_hasher()
_I53 = 2**53
_SOURCE_FIELDS = (
    ("version", pa.string()),
    ("connector", pa.string()),
    ("name", pa.string()),
    ("ts_ms", pa.int64()),
    ("snapshot", pa.string()),
    ("db", pa.string()),
    ("sequence", pa.string()),
    ("schema", pa.string()),
    ("table", pa.string()),
    ("txId", pa.int64()),
    ("lsn", pa.int64()),
    ("xmin", pa.int64()),
    # Debezium 3.x adds these; the per-line parser ignores them, so any value of the declared type is fine.
    ("ts_us", pa.int64()),
    ("ts_ns", pa.int64()),
    ("origin", pa.string()),
    ("origin_lsn", pa.int64()),
)
# The envelope's transaction block (Debezium's provide.transaction.metadata), null nearly always.
_TRANSACTION = pa.struct([("id", pa.string()), ("total_order", pa.int64()), ("data_collection_order", pa.int64())])
_NL, _OPEN, _CLOSE, _MINUS, _DOT, _ZERO = 0x0A, 0x7B, 0x7D, 0x2D, 0x2E, 0x30
READ_OPTIONS = pj.ReadOptions(use_threads=False, block_size=1 << 26)
_OPTIONS: dict[tuple[Any, ...], pj.ParseOptions] = {}


class Decline(Exception):
    """The run is not provably identical to the per-line result: parse it line by line."""


def _row_struct(parser: LineParser) -> pa.StructType:
    return pa.struct([(n, pa.string() if k in TEXT_KINDS else _JSON_TYPE[k]) for n, k in parser.columns])


def parse_options(parser: LineParser) -> pj.ParseOptions:
    key = (parser.spec.table, tuple(parser.columns))  # the decimal mode does not change what Arrow reads
    opts = _OPTIONS.get(key)
    if opts is None:
        row = _row_struct(parser)
        if parser.cdc:
            schema = pa.schema(
                [
                    ("before", row),
                    ("after", row),
                    ("source", pa.struct(list(_SOURCE_FIELDS))),
                    ("op", pa.string()),
                    ("ts_ms", pa.int64()),
                    ("ts_us", pa.int64()),
                    ("ts_ns", pa.int64()),
                    ("transaction", _TRANSACTION),
                ]
            )
        else:
            schema = pa.schema(list(row))
        opts = _OPTIONS[key] = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    return opts


def _require(ok: Any) -> None:
    """Decline unless a boolean array/scalar is true everywhere (nulls count as false)."""
    if isinstance(ok, pa.ChunkedArray | pa.Array):
        if ok.null_count or not pc.all(ok, min_count=0).as_py():  # empty: nothing to refuse
            raise Decline
    elif not ok:
        raise Decline


def _field(arr: Any, name: str) -> pa.Array:
    return pc.struct_field(arr, name)  # parent nulls propagate to the child (unlike StructArray.field)


def canonical_timestamps(valid: pa.Array) -> bool:
    """Whether every value of a string array without nulls matches ``TIMESTAMP_RE``.

    Checked on the values' bytes when they all have one length (as the connector writes them, nearly always):
    RE2 costs several times more per value. Values of mixed lengths go to the regex.
    """
    n = len(valid)
    if not n:
        return True
    lengths = pc.min_max(pc.binary_length(valid))
    width = lengths["min"].as_py()
    bounds = _TS_BOUNDS.get(width)
    if bounds is None or lengths["max"].as_py() != width or valid.null_count:
        return bool(pc.all(pc.match_substring_regex(valid, TIMESTAMP_RE)).as_py())
    low, span = bounds
    _, offsets, data = valid.buffers()
    start = int(np.frombuffer(offsets, np.int32, 1, valid.offset * 4)[0])
    # All of one length: the values are consecutive in the data buffer, one row of the matrix each.
    rel = np.frombuffer(data, np.uint8, n * width, start).reshape(n, width) - low  # wraps below the lowest byte
    if not (rel <= span).all():
        return False
    month, day, hour = (rel[:, i] * 10 + rel[:, i + 1] for i in (5, 8, 11))
    return bool(((month - 1) <= 11).all() and ((day - 1) <= 30).all() and (hour <= 23).all())


def canonical_money(valid: pa.Array) -> bool:
    """Whether every value of a string array without nulls matches ``MONEY_RE``, checked on the values' bytes.

    Each value must hold a dot three bytes before its end and may start with a minus; the array's bytes that
    are not digits must then be exactly those dots and minuses, and the digits before the dot 1 to 10.
    """
    n = len(valid)
    if not n:
        return True
    if valid.null_count:
        return bool(pc.all(pc.match_substring_regex(valid, MONEY_RE)).as_py())
    _, offsets_buffer, data = valid.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, valid.offset * 4)
    lengths = np.diff(offsets)
    if lengths.min() < 4 or lengths.max() > 14:  # "0.00" to "-1234567890.00"
        return False
    first = int(offsets[0])
    text = np.frombuffer(data, np.uint8, int(offsets[-1]) - first, first)
    starts, ends = offsets[:-1] - first, offsets[1:] - first
    negative = text[starts] == _MINUS
    if not (text[ends - 3] == _DOT).all():
        return False
    before_dot = lengths - 3 - negative
    if not ((before_dot >= 1) & (before_dot <= 10)).all():
        return False
    return int(np.count_nonzero((text - _ZERO) > 9)) == n + int(np.count_nonzero(negative))


_MONEY_TYPE = pa.decimal128(MONEY_PRECISION, MONEY_SCALE)
_money_fullmatch = re.compile(MONEY_RE[1:-1]).fullmatch
_MAX_UNSCALED = 10**MONEY_PRECISION  # DECIMAL(12,2): the unscaled value has at most 12 digits


def connect_decimals(values: pa.Array, scale: int) -> pa.Array:
    """DECIMAL(12,2) of a string array of canonical decimal strings and Connect Decimals (base64) of ``scale``.

    As :func:`~logistics_platform.lib.bronze.envelope.decode_decimal` reads them with precise decimals: a string
    with a dot must be canonical (``MONEY_RE``), any other must be base64 of an unscaled value that fits; anything
    else declines. One Python step per value, still far cheaper than parsing the line.
    """
    if scale != MONEY_SCALE:
        raise Decline
    unscaled = np.zeros(len(values), np.int64)
    for i, v in enumerate(values.to_pylist()):
        if v is None:
            continue
        if "." in v:
            if _money_fullmatch(v) is None:
                raise Decline
            u = int(v.replace(".", ""))
        else:
            u = connect_decimal_unscaled(v)  # type: ignore[assignment]
            if u is None or not -_MAX_UNSCALED < u < _MAX_UNSCALED:
                raise Decline
        unscaled[i] = u
    # decimal128: 16-byte little-endian two's complement, the high half the sign of the low half.
    words = np.empty((len(values), 2), np.int64)
    words[:, 0] = unscaled
    words[:, 1] = unscaled >> 63
    validity = values.is_valid().buffers()[1] if values.null_count else None
    return pa.Array.from_buffers(_MONEY_TYPE, len(values), [validity, pa.py_buffer(words.tobytes())])


def _typed(kind: str, values: pa.Array, decimal_mode: str = "", scale: int = 2) -> pa.Array:
    """A column read by Arrow as the per-line path would type it; declines on anything non-canonical."""
    valid = values.drop_null() if values.null_count else values
    if kind == K_DOUBLE:
        _require(pc.is_finite(valid))
        return values
    if kind == K_DECIMAL:
        if canonical_money(valid):
            return values.cast(_MONEY_TYPE)
        if decimal_mode != DECIMAL_PRECISE:
            raise Decline
        return connect_decimals(values, scale)
    if kind == K_TIMESTAMP:
        _require(canonical_timestamps(valid))
        try:
            # Every value ends in Z (checked above): parsed as UTC, its epoch micros are those of the naive time,
            # without first copying each string but its Z.
            return values.cast(_TS_UTC).cast(pa.int64())
        except pa.ArrowInvalid:  # e.g. 2026-02-30
            raise Decline from None
    return values


def _event_ids(texts: pa.Array) -> list[str]:
    """The event id (``envelope.identity_hash``) of each text, from copies of one fresh hasher (cheaper per row)."""
    copy = _HASHER.copy
    out: list[str] = []
    append = out.append
    for t in texts.cast(pa.binary()).to_pylist():
        h = copy()
        h.update(t)
        append(h.hexdigest())
    return out


def fast_rows(
    parser: LineParser, lines: list[bytes], kafka_partition: int, first_offset: int, source_file: str, schema: pa.Schema
) -> tuple[pa.Table, int, int] | None:
    """(rows of ``schema``, late count, tombstones) for a run of lines, or None: parse them line by line."""
    if not lines:
        return None
    return fast_block(parser, b"\n".join(lines), len(lines), kafka_partition, first_offset, source_file, schema)


def newline_positions(block: bytes) -> np.ndarray:
    """Byte positions of the newlines between a block's lines (a last newline ends the last line: not listed).

    The block holds one line more than this lists, as the reader counts lines (a last line without newline counts).
    """
    end = len(block) - 1 if block.endswith(b"\n") else len(block)
    return np.flatnonzero(np.frombuffer(block, np.uint8, end) == _NL)


def object_lines(block: bytes, n_lines: int, newlines: np.ndarray | None = None) -> list[tuple[int, int]] | None:
    """Where the tombstones are in a block whose every other line is exactly one ``{...}``; None if it is not so.

    ``block`` holds ``n_lines`` lines separated by newlines (the last newline optional, so that a file's last
    line without one counts); ``newlines``: its :func:`newline_positions`, when the reader found them already.
    The answer lists (line index, byte position) of each line that is exactly ``null`` (a Kafka tombstone), and
    is empty when every line starts with ``{`` and ends with ``}``.
    """
    layout = odd_lines(block, n_lines, newlines)
    return None if layout is None or layout[1] else layout[0]


def odd_lines(
    block: bytes, n_lines: int, newlines: np.ndarray | None = None
) -> tuple[list[tuple[int, int]], list[int]] | None:
    """:func:`object_lines`, and the indices of the other lines that are not one ``{...}`` instead of None.

    None only when the block is not as described, or its first or last line is empty.

    Vectorised over the block's newlines (CPython's bytes.count, and a scan line by line, cost several times
    more): a line is proven ``{...}`` by the byte after the newline in front of it and the byte before the
    newline behind it; only the lines that are not, expected to be few, are looked at one by one.
    """
    end = len(block) - 1 if block.endswith(b"\n") else len(block)
    if n_lines < 1 or end < 1:
        return None
    data = np.frombuffer(block, np.uint8, end)
    if data[0] == _NL or data[end - 1] == _NL:
        return None  # an empty first or last line (and no byte on one side of that newline)
    if newlines is None:
        newlines = newline_positions(block)
    if len(newlines) != n_lines - 1:
        return None  # not the block described
    ends_ok = data[newlines - 1] == _CLOSE  # line k ends with }
    starts_ok = data[newlines + 1] == _OPEN  # line k + 1 starts with {
    odd: list[int] = [0] if data[0] != _OPEN else []
    for k in np.flatnonzero(~(ends_ok & starts_ok)).tolist():
        if not ends_ok[k] and (not odd or odd[-1] != k):
            odd.append(k)
        if not starts_ok[k]:
            odd.append(k + 1)
    if data[end - 1] != _CLOSE and (not odd or odd[-1] != n_lines - 1):
        odd.append(n_lines - 1)
    tombstones: list[tuple[int, int]] = []
    others: list[int] = []
    for i in odd:
        start = int(newlines[i - 1]) + 1 if i else 0
        stop = int(newlines[i]) if i < n_lines - 1 else end
        if stop - start != 4 or not block.startswith(b"null", start):
            others.append(i)
        else:
            tombstones.append((i, start))
    return tombstones, others


def _offsets(first_offset: int, n_lines: int, dropped: list[int] | None = None) -> pa.Array:
    """Record offsets of a block's lines (int64, vectorised), without the lines at the ``dropped`` indices."""
    full = pc.add(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n_lines)), first_offset - 1)
    if not dropped:
        return full
    parts = []
    at = 0
    for i in dropped:
        parts.append(full.slice(at, i - at))
        at = i + 1
    parts.append(full.slice(at))
    return pa.concat_arrays(parts)


def _without_tombstones(block: bytes, tombstones: list[tuple[int, int]]) -> bytes:
    view = memoryview(block)
    parts = []
    at = 0
    for _, start in tombstones:
        parts.append(view[at:start])
        at = start + 5  # "null" and its newline (the last line's may be missing: slicing past the end is empty)
    parts.append(view[at:])
    return b"".join(parts)


def fast_block(
    parser: LineParser,
    block: bytes,
    n_lines: int,
    kafka_partition: int,
    first_offset: int,
    source_file: str,
    schema: pa.Schema,
    newlines: np.ndarray | None = None,
) -> tuple[pa.Table, int, int] | None:
    """:func:`fast_rows` of a whole block of ``n_lines`` newline-separated lines, without splitting it into lines.

    ``newlines``: the block's :func:`newline_positions`, when the reader found them already.
    """
    tombstones = object_lines(block, n_lines, newlines)
    if tombstones is None:
        return None
    offsets: pa.Array | None = None
    n = n_lines
    if tombstones:
        # Kafka tombstones (exactly `null`, as the connector writes them) are counted, never stored.
        n -= len(tombstones)
        if not n:
            return None
        offsets = _offsets(first_offset, n_lines, [i for i, _ in tombstones])
        block = _without_tombstones(block, tombstones)
    if not block.isascii():
        try:
            block.decode("utf-8")  # Arrow does not validate UTF-8 in strings
        except UnicodeDecodeError:
            return None
    try:
        tbl = pj.read_json(pa.BufferReader(block), read_options=READ_OPTIONS, parse_options=parse_options(parser))
        if tbl.num_rows != n:
            return None
        tbl = tbl.combine_chunks()
        rows, late = build_rows(parser, tbl, n, kafka_partition, first_offset, offsets, source_file, schema)
    except (Decline, pa.ArrowInvalid):
        return None
    return rows, late, len(tombstones)


def build_rows(
    parser: LineParser,
    tbl: pa.Table,
    n: int,
    kafka_partition: int,
    first_offset: int,
    offsets: pa.Array | None,
    source_file: str,
    schema: pa.Schema,
) -> tuple[pa.Table, int]:
    cols: dict[str, Any] = {}
    key_name = parser.key
    string_key = parser.key_kind == K_STRING
    if parser.cdc:
        op = tbl.column("op").chunk(0) if tbl.num_rows else pa.array([], pa.string())
        _require(pc.is_in(op, value_set=pa.array(["c", "u", "d", "r"])))
        source = tbl.column("source").chunk(0)
        lsn, ts_ms = _field(source, "lsn"), _field(source, "ts_ms")
        _require(pc.is_valid(lsn))
        _require(pc.is_valid(ts_ms))
        _require(pc.and_(pc.greater_equal(ts_ms, -_I53), pc.less(ts_ms, _I53)))
        conn = tbl.column("ts_ms").chunk(0)
        conn_valid = conn.drop_null() if conn.null_count else conn
        _require(pc.and_(pc.greater_equal(conn_valid, -_I53), pc.less(conn_valid, _I53)))
        before, after = tbl.column("before").chunk(0), tbl.column("after").chunk(0)
        is_delete = pc.equal(op, "d")
        deletes = pc.any(is_delete).as_py()
        masked = False
        # Deletes: the key from before, no values; the others: the row from after.
        if deletes:
            _require(pc.if_else(is_delete, pc.is_valid(before), pc.is_valid(after)))
            key = pc.if_else(is_delete, _field(before, key_name), _field(after, key_name))
            # A delete normally has no after: its values are then null already and need no masking.
            masked = not pc.all(pc.or_(pc.invert(is_delete), pc.is_null(after))).as_py()
        else:
            _require(pc.is_valid(after))
            key = _field(after, key_name)
        for name, kind in parser.columns:
            values = _typed(kind, _field(after, name), parser.decimal_mode, parser.scales.get(name, 2))
            if name == key_name:
                cols[name] = key
            elif deletes and masked:
                cols[name] = pc.if_else(is_delete, pa.nulls(n, values.type), values)
            else:
                cols[name] = values
        event_us = pc.multiply_checked(ts_ms, 1000)
    else:
        for name, kind in parser.columns:
            cols[name] = _typed(kind, tbl.column(name).chunk(0), parser.decimal_mode, parser.scales.get(name, 2))
        key = cols[key_name]
        event_us = cols[PLAIN_EVENT_TIME_COLUMN]
        _require(pc.is_valid(event_us))
    _require(pc.is_valid(key))
    if string_key:
        _require(pc.greater(pc.binary_length(key), 0))

    is_late = pc.less(event_us, parser.late_before_us)
    gap = pc.subtract_checked(pa.scalar(parser.arrival_us, pa.int64()), event_us)
    lateness = pc.if_else(pc.greater(gap, 0), pc.divide(gap, 1_000_000), 0)
    topic = parser.topic
    key_text = key if string_key else key.cast(pa.string())
    if parser.cdc:
        id_text = pc.binary_join_element_wise(topic, key_text, lsn.cast(pa.string()), op, IDENTITY_SEPARATOR)
    else:
        id_text = pc.binary_join_element_wise(topic, key_text, IDENTITY_SEPARATOR)
    cols.update(
        _topic=pa.repeat(pa.scalar(topic, pa.string()), n),
        _kafka_partition=pa.repeat(pa.scalar(kafka_partition, pa.int32()), n),
        _offset=_offsets(first_offset, n) if offsets is None else offsets,
        _source_file=pa.repeat(pa.scalar(source_file, pa.string()), n),
        _event_id=pa.array(_event_ids(id_text), pa.string()),
        _event_time=event_us,
        _arrival_hour=pa.repeat(pa.scalar(parser.arrival_us, pa.int64()), n),
        _is_late=is_late,
        _lateness_seconds=lateness,
    )
    if parser.cdc:
        cols.update(_op=op, _lsn=lsn, _tx_id=_field(source, "txId"), _connector_ts=pc.multiply_checked(conn, 1000))
    arrays = [cols[f.name].cast(f.type) for f in schema]
    late = pc.sum(is_late).as_py() or 0
    return pa.Table.from_arrays(arrays, schema=schema), late


def _ok(mask: Any) -> np.ndarray:
    """A boolean Arrow mask as numpy, nulls false."""
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), bool)


def _cast_failures(values: pa.Array, start: int = 0) -> list[int]:
    """Indices (from ``start``) of the canonical timestamps that do not cast (2026-02-30), found by halves."""
    try:
        values.cast(_TS_UTC)
        return []
    except pa.ArrowInvalid:
        if len(values) == 1:
            return [start]
    half = len(values) // 2
    return _cast_failures(values.slice(0, half), start) + _cast_failures(values.slice(half), start + half)


def _typed_ok(kind: str, values: pa.Array, decimal_mode: str, scale: int) -> np.ndarray | None:
    """Per value, whether :func:`_typed` would take it (nulls are taken); None: every value."""
    if kind == K_DOUBLE:
        return _ok(pc.or_kleene(pc.is_null(values), pc.is_finite(values)))
    if kind not in TEXT_KINDS:
        return None
    valid = values.drop_null() if values.null_count else values
    if kind == K_DECIMAL:
        if canonical_money(valid):
            return None
        ok = _ok(pc.or_kleene(pc.is_null(values), pc.match_substring_regex(values, MONEY_RE)))
        if decimal_mode == DECIMAL_PRECISE and scale == 2:
            # A Connect Decimal (base64) is taken when it fits, as connect_decimals reads it.
            for i in np.flatnonzero(~ok).tolist():
                v = values[i].as_py()
                u = None if "." in v else connect_decimal_unscaled(v)
                ok[i] = u is not None and -_MAX_UNSCALED < u < _MAX_UNSCALED
        return ok
    if canonical_timestamps(valid):
        ok = np.ones(len(values), bool)
    else:
        ok = _ok(pc.or_kleene(pc.is_null(values), pc.match_substring_regex(values, TIMESTAMP_RE)))
    canonical = np.flatnonzero(ok & _ok(pc.is_valid(values)))
    for i in _cast_failures(values.take(pa.array(canonical))) if len(canonical) else []:
        ok[canonical[i]] = False
    return ok


def row_ok(parser: LineParser, tbl: pa.Table) -> np.ndarray:
    """Per row of a table read by the clean path's JSON reader, whether the checks of :func:`build_rows` take it.

    The row-by-row form of the checks ``build_rows`` makes of whole columns (op, source, key, canonical values), so
    that the rows it would decline on can be parsed line by line and the others still built at once. It may
    refuse more than ``build_rows`` would (a delete's row image is checked too): refused rows only cost time.
    """
    tbl = tbl.combine_chunks()
    n = tbl.num_rows
    ok = np.ones(n, bool)
    if not n:
        return ok
    col = {name: tbl.column(name).chunk(0) for name in tbl.column_names}
    if parser.cdc:
        op = col["op"]
        ok &= _ok(pc.is_in(op, value_set=pa.array(["c", "u", "d", "r"])))
        lsn, ts_ms = _field(col["source"], "lsn"), _field(col["source"], "ts_ms")
        ok &= _ok(pc.is_valid(lsn))
        ok &= _ok(pc.and_(pc.greater_equal(ts_ms, -_I53), pc.less(ts_ms, _I53)))
        conn = col["ts_ms"]
        ok &= _ok(pc.or_kleene(pc.is_null(conn), pc.and_(pc.greater_equal(conn, -_I53), pc.less(conn, _I53))))
        before, after = col["before"], col["after"]
        is_delete = pc.fill_null(pc.equal(op, "d"), False)
        ok &= _ok(pc.if_else(is_delete, pc.is_valid(before), pc.is_valid(after)))
        key = pc.if_else(is_delete, _field(before, parser.key), _field(after, parser.key))
        values = {name: _field(after, name) for name, _ in parser.columns}
    else:
        values = {name: col[name] for name, _ in parser.columns}
        key = values[parser.key]
        ok &= _ok(pc.is_valid(values[PLAIN_EVENT_TIME_COLUMN]))
    ok &= _ok(pc.is_valid(key))
    if parser.key_kind == K_STRING:
        ok &= _ok(pc.greater(pc.binary_length(key), 0))
    for name, kind in parser.columns:
        typed = _typed_ok(kind, values[name], parser.decimal_mode, parser.scales.get(name, 2))
        if typed is not None:
            ok &= typed
    return ok
