"""A pure decoder of PostgreSQL's ``pgoutput`` logical replication messages (protocol version 1, text values)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

# PostgreSQL timestamps count microseconds from 2000-01-01 UTC: this many after 1970-01-01.
PG_EPOCH_UNIX_US = 946_684_800_000_000


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST = _Unchanged()
Value = str | None | _Unchanged


class DecodeError(ValueError):
    """Bytes that are not a pgoutput protocol-1 message."""


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # LSN of the transaction's commit record
    commit_us: int  # commit time, epoch microseconds (UTC)
    xid: int


@dataclass(frozen=True)
class Commit:
    commit_lsn: int
    end_lsn: int  # the position a client confirms once the transaction is durable
    commit_us: int


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    is_key: bool


@dataclass(frozen=True)
class Relation:
    relid: int
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Insert:
    relid: int
    new: tuple[Value, ...]


@dataclass(frozen=True)
class Update:
    relid: int
    new: tuple[Value, ...]
    old: tuple[Value, ...] | None  # the key ('K') or full old row ('O') when the replica identity sends one
    old_is_key_only: bool


@dataclass(frozen=True)
class Delete:
    relid: int
    old: tuple[Value, ...]
    old_is_key_only: bool


@dataclass(frozen=True)
class Truncate:
    relids: tuple[int, ...]


@dataclass(frozen=True)
class Other:
    """Messages capture does not act on (origin, type, logical decoding message)."""

    kind: str


Message = Begin | Commit | Relation | Insert | Update | Delete | Truncate | Other


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, fmt: str) -> tuple[int, ...]:
        """The network-order fields of struct format ``fmt`` (e.g. ``QqI``) at the current position."""
        size = struct.calcsize("!" + fmt)
        if self.pos + size > len(self.buf):
            raise DecodeError(f"message ends at byte {len(self.buf)}, needed {self.pos + size}")
        values = struct.unpack_from("!" + fmt, self.buf, self.pos)
        self.pos += size
        return values

    def byte(self) -> str:
        return chr(self.take("B")[0])

    def cstring(self) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise DecodeError("unterminated string")
        s = self.buf[self.pos : end].decode("utf-8")
        self.pos = end + 1
        return s

    def tuple_data(self) -> tuple[Value, ...]:
        (n,) = self.take("h")
        # The hot loop of a capture (one call per row): the columns index the bytes directly instead of via take.
        buf, pos, end = self.buf, self.pos, len(self.buf)
        out: list[Value] = []
        append = out.append
        for _ in range(n):
            if pos >= end:
                raise DecodeError(f"message ends at byte {end}, needed {pos + 1}")
            kind = buf[pos]
            pos += 1
            if kind == 0x74:  # 't': text value
                if pos + 4 > end:
                    raise DecodeError(f"message ends at byte {end}, needed {pos + 4}")
                (size,) = _I32.unpack_from(buf, pos)
                pos += 4
                if pos + size > end:
                    raise DecodeError("column value runs past the end of the message")
                append(buf[pos : pos + size].decode("utf-8"))
                pos += size
            elif kind == 0x6E:  # 'n': null
                append(None)
            elif kind == 0x75:  # 'u': unchanged TOAST
                append(UNCHANGED_TOAST)
            else:
                raise DecodeError(
                    f"column kind {chr(kind)!r} (binary values need proto_version 2+, which we do not ask)"
                )
        self.pos = pos
        return tuple(out)


_I32 = struct.Struct("!i")


def decode(payload: bytes) -> Message:
    """One pgoutput message from the bytes of one XLogData payload."""
    if not payload:
        raise DecodeError("empty message")
    r = _Reader(bytes(payload))
    kind = r.byte()
    if kind == "B":
        final_lsn, ts, xid = r.take("QqI")
        return Begin(final_lsn, ts + PG_EPOCH_UNIX_US, xid)
    if kind == "C":
        _flags, commit_lsn, end_lsn, ts = r.take("BQQq")
        return Commit(commit_lsn, end_lsn, ts + PG_EPOCH_UNIX_US)
    if kind == "R":
        (relid,) = r.take("I")
        ns, name, ident, (ncols,) = r.cstring(), r.cstring(), r.byte(), r.take("h")
        cols = []
        for _ in range(ncols):
            (flags,) = r.take("B")
            cname = r.cstring()
            oid, _typmod = r.take("Ii")
            cols.append(Column(cname, oid, bool(flags & 1)))
        return Relation(relid, ns, name, ident, tuple(cols))
    if kind in ("I", "U", "D"):
        (relid,) = r.take("I")
        marker = r.byte()
        if kind == "I":
            if marker != "N":
                raise DecodeError("insert without a new tuple")
            return Insert(relid, r.tuple_data())
        if kind == "D":
            if marker not in ("K", "O"):
                raise DecodeError(f"delete: expected an old key or row, got {marker!r}")
            return Delete(relid, r.tuple_data(), marker == "K")
        old: tuple[Value, ...] | None = None
        key_only = marker == "K"
        if marker in ("K", "O"):
            old = r.tuple_data()
            marker = r.byte()
        if marker != "N":
            raise DecodeError(f"update: expected a new tuple, got {marker!r}")
        return Update(relid, r.tuple_data(), old, key_only)
    if kind == "T":
        n, _options = r.take("ib")  # options: cascade / restart identity
        return Truncate(r.take("I" * n))
    if kind in ("O", "Y", "M"):
        return Other(kind)
    raise DecodeError(f"unknown pgoutput message type {kind!r}")
