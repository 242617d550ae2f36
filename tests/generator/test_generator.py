"""The generator writes the contract of docs/contract/sources.md, with every anomaly at its configured rate,
deterministically.

Everything here is proved by reading the generated files back (not by trusting ``_generation.json``): the
summary is then checked against what the files say.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import random
import re
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.cli import main as cli_main
from logistics_platform.generator import GENERATION_FILE, GeneratorConfig, GeneratorConfigError, generate
from logistics_platform.generator import encode as E
from logistics_platform.generator.writer import cdc_file
from logistics_platform.lib import contract
from logistics_platform.lib.timekeys import epoch_micros, from_epoch_micros
from tests.support.off_route import corridor_km
from tests.support.processes import one_line

START = datetime(2026, 11, 1)
HOURS = 12
L_HOURS = 2
FILE_RE = re.compile(
    r"^topics/(?P<topic>[a-z_.]+)/dt=(?P<dt>\d{4}-\d{2}-\d{2})/hr=(?P<hr>\d{2})/"
    r"(?P=topic)\+(?P<part>\d+)\+(?P<offset>\d{10})\.json(?P<gz>\.gz)?$"
)
CDC = {
    "oltp.public.tenants": ("tenant_id", str),
    "oltp.public.couriers": ("courier_id", int),
    "oltp.public.orders": ("order_id", int),
    "oltp.public.payments": ("payment_id", int),
}
PINGS = "logistics.tracking_pings"


def _named(type_name: str) -> set[str]:
    """Names of the contract's columns of one logical type (a name has one type in every table)."""
    return {c.name for s in contract.SOURCES.values() for c in s.columns + s.added_columns if c.type.name == type_name}


DECIMALS = _named(contract.NUMERIC_NAME)
TIMESTAMPS = _named(contract.TIMESTAMPTZ_NAME)
INTS = _named(contract.BIGINT_NAME)
FLOATS = _named(contract.DOUBLE_NAME)
BOOLS = _named(contract.BOOLEAN_NAME)

# Raised rates so that every anomaly occurs often enough in a small data set to measure its rate.
RATES = {
    "duplicate_rate": 0.05,
    "out_of_order_rate": 0.05,
    "late_within_rate": 0.04,
    "late_beyond_rate": 0.04,
    "delete_rate": 0.04,
    "malformed_json_rate": 0.01,
    "invalid_op_rate": 0.01,
    "missing_key_rate": 0.01,
    "invalid_value_rate": 0.01,
    "invalid_envelope_rate": 0.01,
    "schema_envelope_rate": 0.2,
    "gzip_rate": 0.4,
    "decimal_number_rate": 0.05,
    "epoch_micros_rate": 0.05,
    # JSON Lines only, decimals as strings or numbers: Connect Decimal lines and Avro files are test_encodings.py's
    "precise_decimal_rate": 0.0,
    "avro_file_rate": 0.0,
}


def config(seed: int = 11, **overrides: Any) -> GeneratorConfig:
    values: dict[str, Any] = dict(
        hours=HOURS,
        seed=seed,
        tenants=5,
        couriers=40,
        orders_per_day=8000,
        pings_per_day=30000,
        flush_size=400,
        allowed_lateness_hours=L_HOURS,
        delayed_files=2,
        delayed_file_hours=3,
        tier_changes=6,
        noop_updates=3,
        payment_mismatch_rate=0.05,
        refund_rate=0.05,
        **RATES,
    )
    values.update(overrides)
    return GeneratorConfig(start=START, **values)


# ----------------------------------------------------------------------------------------------- reading back
def classify(topic: str, raw: bytes) -> tuple[str, Any]:
    """('row', envelope-or-ping) | ('tombstone', None) | ('quarantine', reason): docs/contract/sources.md."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "quarantine", "malformed_json"
    if isinstance(value, dict) and set(value) == {"schema", "payload"}:
        value = value["payload"]
    if value is None:
        return "tombstone", None
    if topic == PINGS:
        key, key_type = "ping_id", str
        row = value
    else:
        key, key_type = CDC[topic]
        if value.get("op") not in ("c", "u", "d", "r"):
            return "quarantine", "invalid_op"
        src = value.get("source") or {}
        if not isinstance(src.get("lsn"), int) or not isinstance(src.get("ts_ms"), int):
            return "quarantine", "invalid_envelope"
        row = value.get("before") if value["op"] == "d" else value.get("after")
        if not isinstance(row, dict):
            return "quarantine", "invalid_envelope"
    k = row.get(key)
    if k is None or type(k) is not key_type:
        return "quarantine", "missing_key"
    if value.get("op") != "d":
        for col, v in row.items():
            if v is not None and not _valid(col, v):
                return "quarantine", f"invalid_value:{col}"
    return "row", value


def _valid(col: str, v: Any) -> bool:
    if col in DECIMALS:
        try:
            d = Decimal(str(v)) if type(v) in (str, int, float) else None
        except InvalidOperation:
            return False
        return d is not None and d.is_finite() and d == d.quantize(Decimal("0.01"))
    if col in TIMESTAMPS:
        if type(v) is int:
            return True
        try:
            datetime.fromisoformat(v)
        except (TypeError, ValueError):
            return False
        return True
    if col in INTS:
        return type(v) is int
    if col in FLOATS:
        return type(v) in (int, float)
    if col in BOOLS:
        return type(v) is bool
    return type(v) is str


def ts_us(v: Any) -> int:
    return v if type(v) is int else epoch_micros(datetime.fromisoformat(v.replace("Z", "")))


@dataclass
class Line:
    topic: str
    partition: int
    offset: int
    hour: datetime
    path: str
    raw: bytes
    kind: str
    value: Any
    wrapped: bool

    @property
    def event_us(self) -> int:
        if self.topic == PINGS:
            return ts_us(self.value["recorded_at"])
        return self.value["source"]["ts_ms"] * 1000

    @property
    def key(self) -> Any:
        if self.topic == PINGS:
            return self.value["ping_id"]
        k = CDC[self.topic][0]
        return (self.value["before"] if self.value["op"] == "d" else self.value["after"])[k]

    @property
    def identity(self) -> tuple[Any, ...]:
        if self.topic == PINGS:
            return (self.topic, self.key)
        return (self.topic, self.key, self.value["source"]["lsn"], self.value["op"])


@dataclass
class Landing:
    root: Path
    summary: dict[str, Any]
    files: list[str] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    file_lines: dict[str, list[Line]] = field(default_factory=dict)

    def rows(self, topic: str | None = None) -> list[Line]:
        return [x for x in self.lines if x.kind == "row" and (topic is None or x.topic == topic)]

    def events(self, topic: str) -> dict[tuple[Any, ...], Line]:
        """First copy of every distinct event, in landing order."""
        out: dict[tuple[Any, ...], Line] = {}
        for x in self.rows(topic):
            out.setdefault(x.identity, x)
        return out


def read_landing(root: Path) -> Landing:
    land = Landing(root, json.loads((root / GENERATION_FILE).read_text()))
    for path in sorted(root.rglob("*")):
        if path.is_dir() or path.name == GENERATION_FILE:
            continue
        rel = path.relative_to(root).as_posix()
        land.files.append(rel)
        m = FILE_RE.match(rel)
        assert m, f"unexpected file {rel}"
        data = path.read_bytes()
        if m["gz"]:
            data = gzip.decompress(data)
        assert data.endswith(b"\n"), rel
        hour = datetime.strptime(f"{m['dt']} {m['hr']}", "%Y-%m-%d %H")
        parsed = []
        for i, raw in enumerate(data[:-1].split(b"\n")):
            kind, value = classify(m["topic"], raw)
            wrapped = raw.startswith(b'{"schema":')
            parsed.append(Line(m["topic"], int(m["part"]), int(m["offset"]) + i, hour, rel, raw, kind, value, wrapped))
        land.file_lines[rel] = parsed
    # landing order: arrival hour, then offset within a topic-partition
    for rel in sorted(land.file_lines, key=lambda r: (land.file_lines[r][0].hour, r)):
        land.lines.extend(land.file_lines[rel])
    land.lines.sort(key=lambda x: (x.hour, x.topic, x.partition, x.offset))
    return land


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Landing:
    root = tmp_path_factory.mktemp("generated")
    generate(root, config())
    return read_landing(root)


def near(measured: float, expected: float, rel: float = 0.35) -> bool:
    return abs(measured - expected) <= rel * expected


# ----------------------------------------------------------------------------------------------- layout
def test_layout_file_names_and_period(landing: Landing) -> None:
    assert landing.files, "nothing generated"
    topics = {FILE_RE.match(f)["topic"] for f in landing.files}  # type: ignore[index]
    assert topics == {*CDC, PINGS}
    hours = {x.hour for x in landing.lines}
    assert min(hours) == START and max(hours) == START + timedelta(hours=HOURS - 1)
    s = landing.summary
    assert s["totals"]["files"] == len(landing.files)
    assert s["totals"]["lines"] == len(landing.lines)
    assert s["period"] == {
        "start": START.isoformat(),
        "end": (START + timedelta(hours=HOURS)).isoformat(),
        "hours": HOURS,
    }


def test_offsets_are_continuous_per_topic_partition(landing: Landing) -> None:
    by_tp: dict[tuple[str, int], list[tuple[int, int, datetime]]] = defaultdict(list)
    for lines in landing.file_lines.values():
        first = lines[0]
        by_tp[(first.topic, first.partition)].append((first.offset, len(lines), first.hour))
    for tp, files in by_tp.items():
        files.sort()
        expected = 0
        for offset, n, _ in files:
            assert offset == expected, f"{tp}: file starts at {offset}, expected {expected} (gap or repeat)"
            expected += n
        hours = [h for _, _, h in files]
        assert hours == sorted(hours), f"{tp}: offsets go back in time across hour folders"
    addresses = [(x.topic, x.partition, x.offset) for x in landing.lines]
    assert len(addresses) == len(set(addresses))


def test_accounting_per_hour_matches_summary(landing: Landing) -> None:
    got: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for x in landing.lines:
        c = got[x.topic][x.hour.strftime("%Y-%m-%dT%H")]
        c["lines"] += 1
        if x.kind == "quarantine":
            c["quarantined"] += 1
        elif x.kind == "tombstone":
            c["tombstones"] += 1
        else:
            c["rows"] += 1
            if x.event_us < epoch_micros(x.hour) - L_HOURS * 3_600_000_000:
                c["late"] += 1
    for topic, hours in landing.summary["per_hour"].items():
        for hour, exp in hours.items():
            c = got[topic][hour]
            for k in ("lines", "rows", "quarantined", "tombstones", "late"):
                assert c[k] == exp[k], (topic, hour, k)
        assert set(hours) == set(got[topic])


# ----------------------------------------------------------------------------------------------- anomalies
def test_duplicates_at_rate_and_also_in_later_hours(landing: Landing) -> None:
    total_dups = 0
    later_hour = 0
    for topic in (*CDC, PINGS):
        seen: dict[tuple[Any, ...], Line] = {}
        dups = 0
        for x in landing.rows(topic):
            first = seen.setdefault(x.identity, x)
            if first is not x:
                dups += 1
                later_hour += x.hour > first.hour
                assert x.raw == first.raw or x.wrapped != first.wrapped
        assert dups == landing.summary["topics"][topic]["duplicates"], topic
        total_dups += dups
    events = sum(t["events"] for t in landing.summary["topics"].values())
    assert near(total_dups, RATES["duplicate_rate"] * events, 0.2), (total_dups, events)
    assert later_hour > 0


def test_late_events_within_and_beyond_allowed_lateness(landing: Landing) -> None:
    late_us = L_HOURS * 3_600_000_000
    late = within = 0
    for x in landing.rows():
        gap = epoch_micros(x.hour) - x.event_us
        if gap > late_us:
            late += 1
        elif gap > 0:
            within += 1
    s = landing.summary
    assert late == s["totals"]["late_lines"]
    events = sum(t["events"] for t in s["topics"].values())
    injected_beyond = sum(t["late_beyond_injected"] for t in s["topics"].values())
    injected_within = sum(t["late_within_injected"] for t in s["topics"].values())
    assert near(injected_beyond, RATES["late_beyond_rate"] * events, 0.5), (injected_beyond, events)
    assert near(injected_within, RATES["late_within_rate"] * events, 0.5), (injected_within, events)
    assert late >= injected_beyond and within >= injected_within
    # Pings are late because phones were offline: every late ping of a trip arrives in one burst.
    assert any(x.topic == PINGS for x in landing.rows() if epoch_micros(x.hour) - x.event_us > late_us)


def test_out_of_order_changes_land_after_newer_ones(landing: Landing) -> None:
    ooo = Counter()
    update_first = delete_first = 0
    for topic in CDC:
        max_lsn: dict[Any, int] = {}
        seen_ops: dict[Any, set[str]] = defaultdict(set)
        for x in landing.rows(topic):  # landing order: hour, partition, offset (a key has one partition)
            lsn = x.value["source"]["lsn"]
            m = max_lsn.get(x.key)
            if m is None or lsn > m:
                max_lsn[x.key] = lsn
            elif lsn < m:
                ooo[topic] += 1
                if x.value["op"] in ("c", "r") and "u" in seen_ops[x.key]:
                    update_first += 1
                if "d" in seen_ops[x.key]:
                    delete_first += 1
            seen_ops[x.key].add(x.value["op"])
        assert ooo[topic] == landing.summary["topics"][topic]["out_of_order_lines"], topic
    injected = sum(landing.summary["topics"][t]["out_of_order_injected"] for t in CDC)
    cdc_events = sum(landing.summary["topics"][t]["events"] for t in CDC)
    assert near(injected, RATES["out_of_order_rate"] * cdc_events, 0.2), (injected, cdc_events)
    assert sum(ooo.values()) >= injected
    assert update_first > 0, "an update must land before its insert"
    assert delete_first > 0, "a delete must land before an older change"


def test_deletes_are_followed_by_tombstones(landing: Landing) -> None:
    deletes = tombstones = 0
    for lines in landing.file_lines.values():
        for i, x in enumerate(lines):
            if x.kind == "tombstone":
                tombstones += 1
                prev = lines[i - 1]
                assert i > 0 and prev.kind == "row" and prev.value["op"] == "d", x.path
            if x.kind == "row" and x.topic in CDC and x.value["op"] == "d":
                deletes += 1
                assert i + 1 < len(lines) and lines[i + 1].kind == "tombstone", x.path
    assert deletes == tombstones == landing.summary["totals"]["tombstones"]
    orders = landing.events("oltp.public.orders")
    created = sum(1 for x in orders.values() if x.value["op"] in ("c", "r"))
    deleted = sum(1 for x in orders.values() if x.value["op"] == "d")
    assert deleted > 0 and near(deleted, RATES["delete_rate"] * created, 0.6), (deleted, created)
    couriers = landing.events("oltp.public.couriers")
    assert any(x.value["op"] == "d" and set(x.value["before"]) == {"courier_id"} for x in couriers.values())


def test_snapshot_reads_at_the_start(landing: Landing) -> None:
    reads = [x for t in CDC for x in landing.events(t).values() if x.value["op"] == "r"]
    assert {x.topic for x in reads} == set(CDC)
    assert len({x.value["source"]["lsn"] for x in reads}) == 1, "a snapshot is read at one WAL position"
    assert {x.event_us for x in reads} == {epoch_micros(START) + 1_000_000}
    flags = Counter(x.value["source"]["snapshot"] for x in reads)
    assert flags["first"] == 1 and flags["last"] == 1 and flags["true"] == len(reads) - 2
    snapshot_orders = sum(1 for x in reads if x.topic == "oltp.public.orders")
    assert snapshot_orders == round(0.05 * 8000)


def test_every_quarantine_reason_at_its_rate(landing: Landing) -> None:
    got: dict[str, Counter[str]] = defaultdict(Counter)
    for x in landing.lines:
        if x.kind == "quarantine":
            got[x.topic][x.value] += 1
    for topic, t in landing.summary["topics"].items():
        assert dict(got[topic]) == t["quarantine"], topic
    by_base: Counter[str] = Counter()
    for c in got.values():
        for reason, n in c.items():
            by_base[reason.split(":")[0]] += n
    cdc_events = sum(landing.summary["topics"][t]["events"] - landing.summary["topics"][t]["ops"]["d"] for t in CDC)
    all_events = cdc_events + landing.summary["topics"][PINGS]["events"]
    for reason in ("malformed_json", "missing_key", "invalid_value"):
        assert near(by_base[reason], RATES[f"{reason}_rate"] * all_events), (reason, by_base[reason], all_events)
    for reason in ("invalid_op", "invalid_envelope"):  # CDC only: pings have no envelope
        assert near(by_base[reason], RATES[f"{reason}_rate"] * cdc_events, 0.5), (reason, by_base[reason])
    raws = [x.raw for x in landing.lines if x.kind == "quarantine" and x.value == "malformed_json"]
    not_utf8 = sum(1 for r in raws if not _is_utf8(r))
    truncated = sum(1 for r in raws if _is_utf8(r) and r.startswith(b'{"') and not r.endswith(b"}"))
    assert not_utf8 > 0 and truncated > 0
    columns = {r.split(":")[1] for c in got.values() for r in c if r.startswith("invalid_value:")}
    assert {"total_amount", "created_at", "lat"} <= columns or len(columns) >= 4, columns
    envelope_kinds = Counter()
    for x in landing.lines:
        if x.kind == "quarantine" and x.value == "invalid_envelope":
            v = json.loads(x.raw)
            v = v.get("payload", v)
            envelope_kinds["after" if v.get("after") is None else "source"] += 1
    assert envelope_kinds["after"] > 0 and envelope_kinds["source"] > 0


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_encodings_envelope_forms_and_gzip(landing: Landing) -> None:
    mixed = [f for f, lines in landing.file_lines.items() if len({x.wrapped for x in lines if x.kind == "row"}) == 2]
    assert mixed, "both JsonConverter forms must occur in one file"
    wrapped = [x for x in landing.rows() if x.wrapped]
    assert len(wrapped) == landing.summary["totals"]["schema_envelopes"]
    schema = json.loads(wrapped[0].raw)["schema"]
    assert [f["field"] for f in schema["fields"]] == ["before", "after", "source", "op", "ts_ms", "transaction"]
    gz = [f for f in landing.files if f.endswith(".gz")]
    assert gz and len(gz) < len(landing.files)
    assert near(len(gz), RATES["gzip_rate"] * len(landing.files), 0.3)
    for f in gz[:20]:
        head = (landing.root / f).read_bytes()[:10]
        assert head[4:8] == b"\0\0\0\0" and not head[3] & 0x08, "gzip header must have mtime 0 and no file name"
    numbers = epochs = 0
    for x in landing.rows():
        if x.topic in ("oltp.public.orders", "oltp.public.payments") and x.value["op"] != "d":
            after = x.value["after"]
            numbers += any(type(after.get(c)) is float for c in DECIMALS)
            epochs += type(after["updated_at"]) is int
    assert numbers > 0 and epochs > 0


def test_delayed_files_show_up_late_in_old_hour_folders(landing: Landing) -> None:
    delayed = landing.summary["delayed_files"]
    assert len(delayed) == 2
    for d in delayed:
        path = landing.root / d["path"]
        hour = datetime.fromisoformat(d["arrival_hour"])
        mtime = datetime(1970, 1, 1) + timedelta(seconds=os.stat(path).st_mtime)
        assert mtime >= hour + timedelta(hours=3) == datetime.fromisoformat(d["appears_at"]).replace(minute=0, second=0)
        assert len(landing.file_lines[d["path"]]) == d["lines"]
        # Every other file of that folder was written within its hour.
        folder = path.parent
        for other in folder.iterdir():
            if other != path:
                assert datetime(1970, 1, 1) + timedelta(seconds=os.stat(other).st_mtime) < hour + timedelta(hours=1)


def test_tip_amount_appears_only_after_its_start(landing: Landing) -> None:
    tip_from = epoch_micros(datetime.fromisoformat(landing.summary["tip_amount_from"]))
    assert tip_from == epoch_micros(START) + HOURS // 2 * 3_600_000_000
    for x in landing.rows("oltp.public.orders"):
        if x.value["op"] != "d":
            has = "tip_amount" in x.value["after"]
            assert has == (x.event_us >= tip_from), x.raw[:200]
    events = landing.events("oltp.public.orders").values()
    with_tip = sum(1 for x in events if x.value["op"] != "d" and "tip_amount" in x.value["after"])
    assert with_tip == landing.summary["topics"]["oltp.public.orders"]["tip_amount_events"] > 0
    tips = {x.value["after"]["tip_amount"] for x in events if x.value["op"] != "d" and "tip_amount" in x.value["after"]}
    assert "0.00" in tips and len(tips) > 2


def test_coordinates_appear_in_the_orders_created_after_their_start_and_the_pings_follow_them(landing: Landing) -> None:
    """Orders created from ``coordinates_from`` on carry all four coordinates in every change, older ones none; their
    couriers' pings stay near the pickup -> drop-off segment, except a share that rides a detour 3.3 km off it."""
    xy_from = epoch_micros(START) + int(landing.summary["config"]["coordinates_from"] * HOURS * 3600) * 1_000_000
    routes: dict[int, tuple[float, float, float, float]] = {}
    without = 0
    for x in landing.events("oltp.public.orders").values():
        a = x.value["after"]
        if a is None:
            continue
        has = [c in a for c in contract.ORDER_COORDINATES]
        assert has in ([True] * 4, [False] * 4), x.raw[:300]
        assert has[0] == (ts_us(a["created_at"]) >= xy_from), x.raw[:300]
        if has[0]:
            routes[a["order_id"]] = tuple(a[c] for c in contract.ORDER_COORDINATES)  # type: ignore[assignment]
        else:
            without += 1
    assert routes and without
    farthest: dict[int, float] = {}
    for x in landing.events("logistics.tracking_pings").values():
        p = x.value
        if p["order_id"] in routes:
            d = corridor_km(p["lat"], p["lon"], routes[p["order_id"]])
            farthest[p["order_id"]] = max(d, farthest.get(p["order_id"], 0.0))
    detoured = sum(1 for d in farthest.values() if d > 1.5)
    assert 0.05 < detoured / len(farthest) < 0.25, (detoured, len(farthest))
    assert max(farthest.values()) < 3.5 and sum(1 for d in farthest.values() if d < 0.8) > 0.7 * len(farthest)


# ----------------------------------------------------------------------------------------------- believable data
def test_lsns_increase_with_commit_time(landing: Landing) -> None:
    events = [x for t in CDC for x in landing.events(t).values()]
    by_lsn = sorted(events, key=lambda x: x.value["source"]["lsn"])
    ts = [x.value["source"]["ts_ms"] for x in by_lsn]
    assert ts == sorted(ts), "LSN order must follow commit order (one WAL)"
    per_row: dict[tuple[str, Any], list[tuple[int, int]]] = defaultdict(list)
    for x in events:
        per_row[(x.topic, x.key)].append((x.event_us, x.value["source"]["lsn"]))
    for key, changes in per_row.items():
        changes.sort()
        lsns = [lsn for _, lsn in changes]
        assert all(a < b for a, b in itertools.pairwise(lsns)), key
        assert len({t for t, _ in changes}) == len(changes), f"{key}: two changes of one row in one commit"
    for x in events:
        src = x.value["source"]
        assert set(src) == {
            "version",
            "connector",
            "name",
            "ts_ms",
            "snapshot",
            "db",
            "sequence",
            "schema",
            "table",
            "txId",
            "lsn",
            "xmin",
        }
        assert src["connector"] == "postgresql" and src["table"] == x.topic.rsplit(".", 1)[1]
        assert x.value["ts_ms"] >= src["ts_ms"], "the connector processes a change after its commit"


def test_orders_follow_their_lifecycle(landing: Landing) -> None:
    flow = ["created", "assigned", "picked_up", "in_transit", "delivered"]
    per_order: dict[int, list[Line]] = defaultdict(list)
    for x in landing.events("oltp.public.orders").values():
        per_order[x.key].append(x)
    cancelled = delivered = 0
    for changes in per_order.values():
        changes.sort(key=lambda x: x.value["source"]["lsn"])
        statuses = [x.value["after"]["status"] for x in changes if x.value["op"] != "d"]
        if statuses and statuses[-1] == "cancelled":
            cancelled += 1
            statuses = statuses[:-1]
        assert statuses == flow[flow.index(statuses[0]) : flow.index(statuses[0]) + len(statuses)], statuses
        for x in changes:
            if x.value["op"] == "d":
                continue
            a = x.value["after"]
            assert Decimal(str(a["delivery_fee"])) < Decimal(str(a["total_amount"]))
            assert (a["delivered_at"] is not None) == (a["status"] == "delivered")
            if a["status"] == "created":
                assert a["courier_id"] is None
            elif a["status"] != "cancelled":
                assert a["courier_id"] is not None
            assert ts_us(a["promised_at"]) > ts_us(a["created_at"])
        delivered += statuses[-1:] == ["delivered"]
    assert cancelled > 0 and delivered > len(per_order) // 2


def test_payments_reconcile_except_for_some_mismatches(landing: Landing) -> None:
    status: dict[int, str] = {}
    total: dict[int, Decimal] = {}
    for x in sorted(landing.events("oltp.public.orders").values(), key=lambda x: x.value["source"]["lsn"]):
        if x.value["op"] == "d":
            status.pop(x.key, None)
        else:
            status[x.key] = x.value["after"]["status"]
            total[x.key] = Decimal(str(x.value["after"]["total_amount"]))
    payments: dict[int, dict[str, Any]] = {}
    for x in sorted(landing.events("oltp.public.payments").values(), key=lambda x: x.value["source"]["lsn"]):
        if x.value["op"] == "d":
            payments.pop(x.key, None)
        else:
            payments[x.key] = x.value["after"]
    net: dict[int, Decimal] = defaultdict(Decimal)
    refunds = 0
    for p in payments.values():
        amount = Decimal(str(p["amount"]))
        if p["status"] == "captured":
            net[p["order_id"]] += amount
        elif p["status"] == "refunded":
            net[p["order_id"]] -= amount
            refunds += 1
    delivered = [o for o, s in status.items() if s == "delivered"]
    mismatched = [o for o in delivered if net[o] != total[o]]
    assert refunds > 0
    assert 0 < len(mismatched) < 0.15 * len(delivered), (len(mismatched), len(delivered))


def test_tenants_change_tier_and_have_noop_updates(landing: Landing) -> None:
    tier_changes = noop = 0
    for x in landing.events("oltp.public.tenants").values():
        if x.value["op"] != "u":
            continue
        before, after = x.value["before"], x.value["after"]
        tier_changes += before["tier"] != after["tier"]
        if {k: v for k, v in before.items() if k != "updated_at"} == {
            k: v for k, v in after.items() if k != "updated_at"
        }:
            noop += 1
    assert tier_changes >= 3 and noop >= 1
    deleted = [x for x in landing.events("oltp.public.tenants").values() if x.value["op"] == "d"]
    ordered = {x.value["after"]["tenant_id"] for x in landing.rows("oltp.public.orders") if x.value["op"] != "d"}
    assert all(x.key not in ordered for x in deleted), "a deleted tenant never has orders"


def test_pings_follow_couriers_on_trips(landing: Landing) -> None:
    pings = list(landing.events(PINGS).values())
    assert len(pings) > 1000
    assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}", p.key) for p in pings)
    assigned = defaultdict(set)
    for x in landing.rows("oltp.public.orders"):
        if x.value["op"] != "d" and x.value["after"]["courier_id"] is not None:
            assigned[x.value["after"]["order_id"]].add(x.value["after"]["courier_id"])
    carrying = [p for p in pings if p.value["order_id"] is not None]
    assert carrying and any(p.value["order_id"] is None for p in pings)
    assert all(p.value["courier_id"] in assigned[p.value["order_id"]] for p in carrying)
    assert all(-35 < p.value["lat"] < -15 and -55 < p.value["lon"] < -40 for p in pings)


# ----------------------------------------------------------------------------------------------- determinism
def _tree_hash(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_same_seed_is_byte_identical_and_another_seed_differs(tmp_path: Path) -> None:
    small = {"hours": 4, "orders_per_day": 2000, "pings_per_day": 8000}
    generate(tmp_path / "a", config(seed=5, **small))
    generate(tmp_path / "b", config(seed=5, **small))
    generate(tmp_path / "c", config(seed=6, **small))
    a, b, c = (_tree_hash(tmp_path / n) for n in "abc")
    assert a == b
    assert len(a) > 20
    assert a != c
    data_file = next(f for f in a if f.startswith("topics/"))
    assert os.stat(tmp_path / "a" / data_file).st_mtime == os.stat(tmp_path / "b" / data_file).st_mtime


def test_clean_config_has_valid_lines_only(tmp_path: Path) -> None:
    cfg = GeneratorConfig.clean(START, hours=3, seed=2, orders_per_day=2000, pings_per_day=8000)
    summary = generate(tmp_path, cfg)
    land = read_landing(tmp_path)
    assert not any(x.kind == "quarantine" for x in land.lines)
    assert not any(x.wrapped for x in land.lines) and not any(f.endswith(".gz") for f in land.files)
    assert summary["delayed_files"] == [] and summary["totals"]["quarantined"] == 0
    assert summary["totals"]["duplicates"] > 0  # redeliveries are valid data and stay


def test_refuses_to_mix_two_runs_in_one_directory(tmp_path: Path) -> None:
    generate(tmp_path, GeneratorConfig.clean(START, hours=1, orders_per_day=200, pings_per_day=0))
    with pytest.raises(FileExistsError, match="never repeat"):
        generate(tmp_path, GeneratorConfig.clean(START, hours=1, orders_per_day=200, pings_per_day=0))


@pytest.mark.parametrize("hours", [1, 2])
@pytest.mark.parametrize("seed", [2, 4, 5, 6, 7])
def test_snapshot_orders_cancelled_right_after_the_snapshot(tmp_path: Path, seed: int, hours: int) -> None:
    """Regression: a snapshot order picked up within a second of the snapshot and cancelled had its cancel (and
    assignment) committed before the period, and generation failed ("transaction ... before the period starts")."""
    cfg = GeneratorConfig.clean(
        START, hours=hours, seed=seed, orders_per_day=2000, pings_per_day=0, snapshot_rate=1.0, cancel_rate=1.0
    )
    summary = generate(tmp_path, cfg)
    land = read_landing(tmp_path)
    start_ms = int((START - datetime(1970, 1, 1)).total_seconds()) * 1000
    orders = land.rows("oltp.public.orders")
    assert len(orders) >= 2000 and summary["topics"]["oltp.public.orders"]["ops"]["r"] == 2000
    snapshot_ms: dict[int, int] = {}
    for x in orders:
        assert x.value["source"]["ts_ms"] >= start_ms, x.raw
        if x.value["op"] == "r":
            snapshot_ms[x.key] = x.value["source"]["ts_ms"]
    for x in orders:  # every later change of a snapshot order commits after its snapshot read
        if x.value["op"] != "r":
            assert x.value["source"]["ts_ms"] >= snapshot_ms.get(x.key, start_ms), x.raw


# ----------------------------------------------------------------------------------------------- config / CLI
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"start": datetime(2026, 11, 1, 10, 30)}, "full hour"),
        ({"hours": 0}, "hours=0"),
        ({"duplicate_rate": 1.5}, "duplicate_rate"),
        ({"partitions": {"orders": 0}}, "partitions"),
        ({"partitions": {"shipments": 2}}, "unknown table"),
        ({"malformed_json_rate": 0.3, "invalid_value_rate": 0.3}, "more than 0.5"),
        ({"cancel_rate": 1.0}, "no delivered trips"),
    ],
)
def test_config_rejects_bad_values(changes: dict[str, Any], message: str) -> None:
    values = {"start": START, **changes}
    with pytest.raises(GeneratorConfigError, match=message):
        GeneratorConfig(**values)


def test_config_clean_and_partitions_merge() -> None:
    cfg = GeneratorConfig.clean(START, partitions={"orders": 6})
    assert cfg.partitions["orders"] == 6 and cfg.partitions["tracking_pings"] == 4
    assert cfg.malformed_total == 0 and cfg.gzip_rate == 0 and cfg.schema_envelope_rate == 0
    assert cfg.duplicate_rate > 0
    assert GeneratorConfig(start=START).to_json()["start"] == "2026-11-01T00:00:00"


def test_cli_generates_and_skips_when_present(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "landing"
    args = ["generate", "--out", str(out), "--start", "2026-11-01", "--hours", "2", "--seed", "3"]
    args += ["--orders-per-day", "500", "--pings-per-day", "2000", "--duplicate-rate", "0.1", "--quiet"]
    assert cli_main(args) == 0
    text = capsys.readouterr().out
    assert "lines/s" in text and "oltp.public.orders" in text
    summary = json.loads((out / GENERATION_FILE).read_text())
    assert summary["config"]["duplicate_rate"] == 0.1 and summary["period"]["hours"] == 2
    assert cli_main([*args, "--if-absent"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert cli_main(args) == 1, "a second run into the same directory would repeat offsets"
    with pytest.raises(SystemExit, match="not a date"):
        cli_main(["generate", "--out", str(tmp_path / "x"), "--start", "tomorrow"])


def test_cli_coordinates_from_sets_when_orders_gain_coordinates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["generate", "--start", "2026-11-01", "--hours", "4", "--seed", "3", "--clean", "--quiet"]
    args += ["--orders-per-day", "480", "--pings-per-day", "0"]
    assert cli_main([*args, "--out", str(tmp_path / "half"), "--coordinates-from", "0.5"]) == 0
    assert json.loads((tmp_path / "half" / GENERATION_FILE).read_text())["config"]["coordinates_from"] == 0.5
    created: dict[bool, list[str]] = {True: [], False: []}  # with coordinates -> created_at of the inserts
    for path in (tmp_path / "half" / "topics" / "oltp.public.orders").rglob("*.json"):
        for line in path.read_text().splitlines():
            e = json.loads(line) if line.strip() != "null" else None
            if e is not None and e["op"] == "c":
                created[e["after"].get("pickup_lat") is not None].append(e["after"]["created_at"])
    # Half of a 4-hour period: orders created from 02:00 carry them, those before do not.
    assert created[True] and created[False]
    assert max(created[False]) < "2026-11-01T02:00" <= min(created[True])
    assert cli_main([*args, "--out", str(tmp_path / "never"), "--coordinates-from", "1"]) == 0
    assert json.loads((tmp_path / "never" / GENERATION_FILE).read_text())["config"]["coordinates_from"] is None
    capsys.readouterr()
    for bad in ("1.5", "-0.1"):
        assert cli_main([*args, "--out", str(tmp_path / "bad"), "--coordinates-from", bad]) == 2
        one_line(capsys, f"coordinates_from={float(bad)} must be between 0 and 1")
    with pytest.raises(SystemExit) as exited:
        cli_main([*args, "--out", str(tmp_path / "bad"), "--coordinates-from", "soon"])
    assert exited.value.code == 2
    one_line(capsys, "--coordinates-from", "invalid float value: 'soon'")
    assert not (tmp_path / "bad").exists()


# ----------------------------------------------------------------------------------------------- pure helpers
def _envelope(
    table: str,
    op: str,
    before: str,
    after: str,
    commit_ms: int,
    lsn: int,
    prev_lsn: int,
    tx_id: int,
    connector_ms: int,
    snapshot: str = "false",
) -> str:
    """A Debezium change event as Kafka Connect's JsonConverter writes it with ``schemas.enable=false``: the
    reference for the commit loop's inlined f-string (generator/cdc.py)."""
    return (
        f'{{"before":{before},"after":{after},"source":{{"version":"{E.DEBEZIUM_VERSION}","connector":"postgresql",'
        f'"name":"oltp","ts_ms":{commit_ms},"snapshot":"{snapshot}","db":"oltp",'
        f'"sequence":"[\\"{prev_lsn}\\",\\"{lsn}\\"]","schema":"public","table":"{table}","txId":{tx_id},'
        f'"lsn":{lsn},"xmin":null}},"op":"{op}","ts_ms":{connector_ms},"transaction":null}}'
    )


def test_timestamp_and_decimal_encoders() -> None:
    us = epoch_micros(datetime(2026, 11, 2, 10, 15, 30, 123456))
    assert E.iso(us) == "2026-11-02T10:15:30.123456Z"
    assert E.ts_iso(us) == '"2026-11-02T10:15:30.123456Z"' and E.ts_epoch(us) == str(us)
    assert E.ts_iso(None) == E.ts_epoch(None) == "null"
    assert from_epoch_micros(us) == datetime(2026, 11, 2, 10, 15, 30, 123456)
    assert E.dec_str(12990) == '"129.90"' and E.dec_num(5) == "0.05" and E.dec_str(-150) == '"-1.50"'
    assert json.loads(E.dec_num(12990)) == 129.9


def test_rows_and_envelopes_are_valid_json() -> None:
    after = E.row("orders", [1, "t-001", None, "sp-centro", "created", 12990, 990, 0, 60_000_000, None, 0, 250])
    row = json.loads(after)
    assert (
        row["tip_amount"] == "2.50" and row["courier_id"] is None and row["created_at"] == "1970-01-01T00:00:00.000000Z"
    )
    env = _envelope("orders", "c", "null", after, 1000, 42, 40, 7, 1001)
    value = json.loads(env)
    assert value["source"]["sequence"] == '["40","42"]' and value["op"] == "c" and value["after"] == row
    wrapped = json.loads(E.wrap_with_schema(E.connect_schema("orders", ("tip_amount",)), env))
    fields = wrapped["schema"]["fields"][1]["fields"]
    assert [f["field"] for f in fields][-1] == "tip_amount" and wrapped["payload"] == value
    ping = json.loads(E.ping_line("id", 1, None, -23.5, -46.6, 12.3, 0))
    assert ping == {
        "ping_id": "id",
        "courier_id": 1,
        "order_id": None,
        "lat": -23.5,
        "lon": -46.6,
        "speed_kmh": 12.3,
        "recorded_at": "1970-01-01T00:00:00.000000Z",
    }


def test_partitions_and_paths_are_stable() -> None:
    assert E.partition_of(100_001, 3) == 100_001 % 3
    assert E.partition_of("t-001", 4) == E.partition_of("t-001", 4)
    assert {E.partition_of(f"t-{i:03d}", 4) for i in range(40)} == {0, 1, 2, 3}
    rel = E.landing_relpath("oltp.public.orders", epoch_micros(datetime(2026, 11, 2, 7)), 2, 1234, True)
    assert rel == "topics/oltp.public.orders/dt=2026-11-02/hr=07/oltp.public.orders+2+0000001234.json.gz"
    assert FILE_RE.match(rel)


def test_file_text_is_reproducible_and_keeps_raw_bytes() -> None:
    lines = ['{"a":1}', "null", 'x"\udce9']
    plain = cdc_file([(0, line, None, 0, 1) for line in lines])[0]
    assert plain == b'{"a":1}\nnull\nx"\xe9\n'
    assert zlib.compress(plain, 1, 31) == gzip.compress(plain, compresslevel=1, mtime=0)  # the writer's gzip
    assert gzip.decompress(zlib.compress(plain, 1, 31)) == plain


@pytest.mark.parametrize("kind", E.CDC_REASONS)
def test_each_corruption_gives_its_reason(kind: str) -> None:
    rng = random.Random(1)
    after = E.row("orders", [9, "t-001", 5, "sp-centro", "assigned", 12990, 990, 0, 60_000_000, None, 0, None])
    env = _envelope("orders", "u", "null", after, 1000, 42, 40, 7, 1001)
    for i in range(30):
        schema = E.connect_schema("orders") if i % 2 else None
        bad, reason = E.corrupt(env, "orders", "order_id", kind, rng, schema)
        assert reason.split(":")[0] == kind
        got = classify("oltp.public.orders", bad.encode("utf-8", "surrogateescape"))
        assert got == ("quarantine", reason), (bad[:120], reason)


@pytest.mark.parametrize("kind", E.PLAIN_REASONS)
def test_each_ping_corruption_gives_its_reason(kind: str) -> None:
    rng = random.Random(2)
    line = E.ping_line("0f0e0d0c-0b0a-4090-a080-706050403020", 7, 100, -23.5, -46.6, 20.0, 10**15)
    for _ in range(30):
        bad, reason = E.corrupt(line, "tracking_pings", "ping_id", kind, rng, None)
        assert classify(PINGS, bad.encode("utf-8", "surrogateescape")) == ("quarantine", reason), bad


def test_row_images_are_the_contracts_columns_rendered_by_type(landing: Landing) -> None:
    """Every canonical row image (decimal strings, ISO timestamps) of every CDC topic holds the contract's columns in
    its order, then the added columns it has, each rendered as encode.row renders its contract type."""
    for table in contract.CDC_TABLES:
        source = contract.SOURCES[table]
        checked = 0
        for x in landing.events(source.topic).values():
            a = x.value["after"]
            if a is None or any(type(a[c.name]) is int for c in source.columns if c.type == contract.TIMESTAMPTZ):
                continue
            if any(type(a[c.name]) is not str for c in source.columns if c.type.is_decimal):
                continue
            added = [c for c in source.added_columns if c.name in a]
            cols = [*source.columns, *added]
            assert list(a) == [c.name for c in cols], table
            values = [
                None
                if a.get(c.name) is None
                else round(Decimal(a[c.name]) * 100)
                if c.type.is_decimal
                else ts_us(a[c.name])
                if c.type == contract.TIMESTAMPTZ
                else a[c.name]
                for c in (*source.columns, *source.added_columns)  # an added column it lacks: None, left out
            ]
            expected = E.row(table, values)
            assert json.dumps(a, separators=(",", ":"), ensure_ascii=False) == expected
            assert f'"after":{expected}'.encode() in x.raw
            checked += 1
        assert checked, table


def test_cdc_envelopes_match_the_reference_renderer(landing: Landing) -> None:
    """The commit loop's inlined envelope writes exactly what the reference renderer writes, for every CDC line."""
    checked = 0
    for topic in CDC:
        for x in landing.rows(topic):
            if x.wrapped:
                continue
            text = x.raw.decode("utf-8", "surrogateescape")
            before = text[len('{"before":') : text.index(',"after":')]
            after = text[text.index(',"after":') + len(',"after":') : text.index(',"source":')]
            src = x.value["source"]
            prev_lsn = int(json.loads(src["sequence"])[0])
            expected = _envelope(
                src["table"], x.value["op"], before, after, src["ts_ms"], src["lsn"], prev_lsn, src["txId"],
                x.value["ts_ms"], src["snapshot"],
            )  # fmt: skip
            assert text == expected
            checked += 1
    assert checked > 1000


def test_truth_matches_the_final_state_in_the_files(landing: Landing) -> None:
    """``truth`` in _generation.json is what the marts must show: latest change by LSN, deletes removed."""
    latest: dict[int, Line] = {}
    for x in landing.events("oltp.public.orders").values():
        if x.key not in latest or x.value["source"]["lsn"] > latest[x.key].value["source"]["lsn"]:
            latest[x.key] = x
    existing = {k: x.value["after"] for k, x in latest.items() if x.value["op"] != "d"}
    delivered = [a for a in existing.values() if a["status"] == "delivered"]
    truth = landing.summary["truth"]
    assert truth["orders_existing"] == len(existing)
    assert truth["orders_deleted"] == len(latest) - len(existing)
    assert truth["orders_delivered"] == len(delivered)
    assert Decimal(truth["gross_revenue_delivered"]) == sum(Decimal(str(a["total_amount"])) for a in delivered)


def _uuid4_text(bits: int) -> str:
    """The version-4 UUID text that encode.uuid4_column makes of 128 random bits (the reference)."""
    h = f"{bits:032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def test_uuid_column_has_the_uuid4_layout() -> None:
    import pyarrow as pa

    raw = random.Random(3).randbytes(16 * 500)
    ids = E.uuid4_column(raw).to_pylist()
    assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}", i) for i in ids)
    assert len(set(ids)) == 500
    assert ids == [_uuid4_text(int.from_bytes(raw[16 * i : 16 * i + 16], "big")) for i in range(500)]
    edge = E.uuid4_column(bytes(16) + b"\xff" * 16)
    assert isinstance(edge, pa.Array)
    assert edge.to_pylist() == ["00000000-0000-4000-a000-000000000000", "ffffffff-ffff-4fff-afff-ffffffffffff"]
