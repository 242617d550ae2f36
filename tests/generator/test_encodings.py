"""Debezium's default encodings in generated landing zones: JSON lines with Connect Decimal (base64) decimals, with and
without the schema block, and Avro container files as Confluent's AvroConverter and a sink's AvroFormat write them.

The same config with these rates at 0 lands the same events as JSON Lines with decimal strings: every Avro record
and every base64 decimal is checked against that rendering. DuckDB's ``read_avro`` decodes the containers.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from io import BytesIO
from itertools import pairwise
from pathlib import Path
from typing import Any

import duckdb
import fastavro
import pytest

from logistics_platform.generator import GENERATION_FILE, GeneratorConfig, generate
from logistics_platform.generator import avro as A
from logistics_platform.generator import encode as E
from logistics_platform.lib import contract
from logistics_platform.lib.connections import load_extensions

FIXTURES = Path(__file__).parents[1] / "debezium" / "fixtures"
FILE_RE = re.compile(
    r"topics/(?P<topic>[^/]+)/dt=[^/]+/hr=\d\d/(?P=topic)\+(?P<part>\d+)\+(?P<offset>\d{10})\.(?P<ext>.+)$"
)
CDC_TABLES = ("tenants", "couriers", "orders", "payments")
MONEY = {"total_amount", "delivery_fee", "amount", "tip_amount"}
TIMESTAMPS = {"updated_at", "created_at", "promised_at", "delivered_at"}

CONFIG = GeneratorConfig(
    start=datetime(2026, 11, 1, 6),
    hours=10,
    seed=77,
    tenants=4,
    couriers=25,
    orders_per_day=2000,
    pings_per_day=2000,
    partitions={"orders": 2, "payments": 2},
    flush_size=150,
    delete_rate=0.05,
    schema_envelope_rate=0.3,
    gzip_rate=0.5,
    decimal_number_rate=0.05,
    epoch_micros_rate=0.05,
    delayed_files=2,
    delayed_file_hours=2,
    tip_amount_from=0.4,
    precise_decimal_rate=0.3,
    avro_file_rate=0.3,
)
JSON_ONLY = replace(CONFIG, avro_file_rate=0.0)
PLAIN = replace(CONFIG, avro_file_rate=0.0, precise_decimal_rate=0.0)


def _generated(factory: pytest.TempPathFactory, cfg: GeneratorConfig, name: str) -> Path:
    root = factory.mktemp(name)
    generate(root, cfg)
    return root


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory, CONFIG, "mixed")


@pytest.fixture(scope="module")
def json_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory, JSON_ONLY, "json_only")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory, PLAIN, "plain")


def _summary(root: Path) -> dict[str, Any]:
    return json.loads((root / GENERATION_FILE).read_text(encoding="utf-8"))


def _lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    return data[:-1].split(b"\n")


def _json_files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted((root / "topics").rglob("*.json*"))}


def _envelope(raw: bytes) -> dict[str, Any] | None:
    """The envelope of a valid-looking JSON line (unwrapped), None for tombstones and lines that do not parse."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if isinstance(value, dict) and "payload" in value and "schema" in value:
        value = value["payload"]
    return value if isinstance(value, dict) and "source" in value else None


def _decimal(value: Any, scale: int = 2) -> Decimal:
    """A decimal as a JSON line or Avro carries it: decimal string, number, base64 Connect Decimal, or bytes."""
    if isinstance(value, bytes):
        return Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-scale)
    if isinstance(value, str) and "." not in value:
        return Decimal(int.from_bytes(E.b64decode(value), "big", signed=True)).scaleb(-scale)
    return Decimal(str(value))


def _valid_decimals(env: dict[str, Any]) -> bool:
    images = [i for i in (env.get("before"), env.get("after")) if isinstance(i, dict)]
    try:
        [_normal(i) for i in images]
    except (ArithmeticError, ValueError):
        return False
    return True


def _normal(image: dict[str, Any] | None) -> dict[str, Any] | None:
    """A row image with decimals as Decimal and timestamps as ISO text, whatever their encoding."""
    if image is None:
        return None
    out: dict[str, Any] = {}
    for k, v in image.items():
        if v is not None and k in MONEY:
            v = _decimal(v)
        elif v is not None and k in TIMESTAMPS and isinstance(v, int):
            v = E.iso(v)
        out[k] = v
    return out


KEYS = {"tenants": "tenant_id", "couriers": "courier_id", "orders": "order_id", "payments": "payment_id"}


def _identity(env: dict[str, Any]) -> tuple[Any, ...]:
    """(table, key, lsn, op): snapshot rows share one lsn."""
    s = env["source"]
    row = env["before"] if env["op"] == "d" else env["after"]
    return (s["table"], row[KEYS[s["table"]]], s["lsn"], env["op"])


def _avro_records(con: duckdb.DuckDBPyConnection, path: Path) -> list[dict[str, Any]]:
    cur = con.execute(
        "select before, after, source, op, ts_ms from read_avro(?, hive_partitioning = false)", [str(path)]
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _container_meta(path: Path) -> dict[str, bytes]:
    with open(path, "rb") as f:
        return {k: v.encode() for k, v in fastavro.reader(f).metadata.items()}


# ----------------------------------------------------------------------------------------------- Avro files
def _same_event(rec: dict[str, Any], want: dict[str, Any]) -> bool:
    """An Avro record has the values of a JSON envelope (key-only before images: the rest are placeholders)."""
    if rec["ts_ms"] != want.get("ts_ms") or rec["source"] != want.get("source"):
        return False
    after, want_after = _normal(rec["after"]), _normal(want.get("after"))
    # a change from before tip_amount (or the coordinates), written under the newer schema: projected, the column null
    for column in ("tip_amount", *contract.ORDER_COORDINATES):
        projected = after is not None and want_after is not None and column not in want_after
        if projected and after.pop(column, None) is not None:  # type: ignore[union-attr]
            return False
    if after != want_after:
        return False
    got_before, want_before = _normal(rec["before"]), _normal(want.get("before"))
    if want_before is None or got_before is None:
        return got_before is want_before
    return all(k in got_before and got_before[k] == v for k, v in want_before.items())


def test_avro_records_equal_the_json_rendering_of_the_same_events(mixed: Path, json_only: Path) -> None:
    """Every record of every Avro file decodes (DuckDB read_avro) to the values the JSON-only run lands for it."""
    # corrupted copies share an event's identity: a record must equal one of the lines of its identity
    by_identity: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for path in _json_files(json_only).values():
        for raw in _lines(path):
            env = _envelope(raw)
            try:
                by_identity.setdefault(_identity(env), []).append(env)  # type: ignore[arg-type]
            except (KeyError, TypeError, AttributeError):
                continue  # a corrupted line without op, key or source
    con = load_extensions(duckdb.connect())
    files = sorted((mixed / "topics").rglob("*.avro"))
    assert {f.parent.parent.parent.name for f in files} == {f"oltp.public.{t}" for t in CDC_TABLES}
    checked = Counter[str]()
    for path in files:
        table = path.name.split("+")[0].split(".")[-1]
        for rec in _avro_records(con, path):
            candidates = by_identity[_identity(rec)]
            assert any(_same_event(rec, want) for want in candidates), (path, rec, candidates)
            checked[table] += 1
    assert all(checked[t] for t in CDC_TABLES), checked


def test_avro_files_hold_no_tombstones_and_offsets_follow_the_records(mixed: Path) -> None:
    con = load_extensions(duckdb.connect())
    ends: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    for path in sorted((mixed / "topics").rglob("*")):
        m = FILE_RE.search(path.as_posix())
        if m is None:
            continue
        if m["ext"] == "avro":
            n = con.execute("select count(*) from read_avro(?)", [str(path)]).fetchone()[0]  # type: ignore[index]
            assert n > 0
        else:
            n = len(_lines(path))
        ends.setdefault((m["topic"], int(m["part"])), []).append((int(m["offset"]), n, m["ext"]))
    for spans in ends.values():
        spans.sort()
        for (start, n, _), (nxt, _, _) in pairwise(spans):
            assert nxt == start + n  # record i of a file has address start_offset + i; the next file follows
    summary = _summary(mixed)
    assert summary["totals"]["avro_files"] == sum(1 for s in ends.values() for *_, ext in s if ext == "avro") > 0


def _common(schema: Any, other: Any) -> Any:
    """``schema`` with only the record fields ``other`` has too, in ``other``'s order (recursively)."""
    if isinstance(schema, dict) and isinstance(other, dict):
        out = {k: _common(v, other.get(k)) for k, v in schema.items()}
        if "fields" in schema and "fields" in other:
            mine = {f["name"]: f for f in schema["fields"]}
            theirs = {f["name"]: f for f in other["fields"]}
            out["fields"] = [_common(mine[n], theirs[n]) for n in theirs if n in mine]
        return out
    if isinstance(schema, list) and isinstance(other, list) and len(schema) == len(other):
        return [_common(s, o) for s, o in zip(schema, other, strict=True)]
    return schema


def test_avro_writer_schema_is_the_real_connectors_modulo_field_lists(mixed: Path) -> None:
    """The header's schema equals the AvroConverter's (tests/debezium/fixtures/precise-avro) on the fields both
    have: names, namespaces, types, logical types, connect.* properties, defaults, field order."""
    seen = set()
    for path in sorted((mixed / "topics").rglob("*.avro")):
        table = path.name.split("+")[0].split(".")[-1]
        meta = _container_meta(path)
        assert meta["avro.codec"] in (b"null", b"deflate")
        ours = json.loads(meta["avro.schema"])
        real = json.loads(_container_meta(FIXTURES / "precise-avro" / f"oltp.public.{table}.avro")["avro.schema"])
        assert _common(ours, real) == _common(real, ours), table
        value_fields = ours["fields"][0]["type"][1]["fields"]
        added = {f["name"]: f for f in value_fields[len(contract.SOURCES[table].columns) :]}
        if "tip_amount" in added:  # the added column: optional, a decimal like total_amount
            decimal = real["fields"][0]["type"][1]["fields"][5]["type"]
            assert added["tip_amount"] == {"name": "tip_amount", "type": ["null", decimal], "default": None}
            seen.add("orders+tip")
        if "pickup_lat" in added:  # the coordinates: optional doubles, the last fields
            assert list(added)[-4:] == list(contract.ORDER_COORDINATES)
            for c in contract.ORDER_COORDINATES:
                assert added[c] == {"name": c, "type": ["null", "double"], "default": None}
            seen.add("orders+coordinates")
        seen.add(table)
        seen.add(meta["avro.codec"].decode())
    assert seen >= {*CDC_TABLES, "orders+tip", "orders+coordinates", "null", "deflate"}, seen
    # the generator's fields are a subset of the real connector's (the envelope and source of Debezium 2.7)
    real_orders = json.loads(_container_meta(FIXTURES / "precise-avro" / "oltp.public.orders.avro")["avro.schema"])
    assert [f["name"] for f in A.writer_schema("orders")["fields"]] == [
        f["name"] for f in real_orders["fields"] if f["name"] not in ("ts_us", "ts_ns")
    ]


def test_a_new_avro_file_when_the_writer_schema_changes(mixed: Path) -> None:
    """Orders gaining tip_amount start a new file; an older change arriving later is projected to the newer schema
    (schema.compatibility=BACKWARD), so a partition never goes back to the older schema."""
    con = load_extensions(duckdb.connect())
    by_partition: dict[int, list[tuple[int, bool]]] = {}
    tips = 0
    for path in sorted((mixed / "topics" / "oltp.public.orders").rglob("*.avro")):
        m = FILE_RE.search(path.as_posix())
        assert m is not None
        schema = json.loads(_container_meta(path)["avro.schema"])
        has_tip = any(f["name"] == "tip_amount" for f in schema["fields"][0]["type"][1]["fields"])
        by_partition.setdefault(int(m["part"]), []).append((int(m["offset"]), has_tip))
        if has_tip:
            rows = con.execute("select after.tip_amount from read_avro(?)", [str(path)]).fetchall()
            tips += sum(1 for r in rows if r[0] is not None)
    assert tips
    switched = 0
    for files in by_partition.values():
        kinds = [has_tip for _, has_tip in sorted(files)]
        assert kinds == sorted(kinds), kinds  # the older schema never follows the newer one
        switched += kinds[0] != kinds[-1]
    assert switched, by_partition


# ----------------------------------------------------------------------------------------------- precise decimals
def test_precise_decimals_decode_to_the_decimal_strings(json_only: Path, plain: Path) -> None:
    """With the same seed, precise lines differ from the plain run only in their decimals, which decode equal."""
    plain_files, json_files = _json_files(plain), _json_files(json_only)
    assert plain_files.keys() == json_files.keys()  # same files, names, offsets: only the encoding differs
    precise = wrapped = 0
    for rel, path in json_files.items():
        if "tracking_pings" in rel:
            assert path.read_bytes() == plain_files[rel].read_bytes()
            continue
        for raw, raw_plain in zip(_lines(path), _lines(plain_files[rel]), strict=True):
            env, env_plain = _envelope(raw), _envelope(raw_plain)
            if env is None or env_plain is None:
                continue
            if raw == raw_plain or not _valid_decimals(env_plain):
                continue  # the same line, or a corrupted copy (invalid_value: a decimal that does not parse)
            precise += 1
            base64_seen = False
            for image, image_plain in ((env["before"], env_plain["before"]), (env["after"], env_plain["after"])):
                assert _normal(image) == _normal(image_plain), rel
                # an update's before image is the previous change's row as it was rendered, in its own encoding
                base64_seen |= any(isinstance(v, str) and "." not in v for k, v in (image or {}).items() if k in MONEY)
            assert base64_seen, raw
            if raw.startswith(b'{"schema":'):
                wrapped += 1
                fields = {f["field"]: f for f in json.loads(raw)["schema"]["fields"][1]["fields"]}
                for col in MONEY & fields.keys():
                    f = fields[col]
                    assert f["type"] == "bytes" and f["name"] == "org.apache.kafka.connect.data.Decimal"
                    assert f["parameters"] == {"scale": "2", "connect.decimal.precision": "12"} and f["version"] == 1
    summary = _summary(json_only)
    assert precise and wrapped
    assert precise >= sum(t["precise_decimals"] for t in summary["topics"].values()) > 0


def test_precise_schema_field_has_the_real_connectors_shape() -> None:
    real = json.loads((FIXTURES / "precise-json-schemas" / "oltp.public.orders.jsonl").read_text().splitlines()[0])
    real_fields = {f["field"]: f for f in real["schema"]["fields"][1]["fields"]}
    ours = {f["field"]: f for f in json.loads(E.connect_schema("orders", precise=True))["fields"][1]["fields"]}
    for col in ("total_amount", "delivery_fee"):
        # the same keys and values, but for optionality (the generator's schema keeps every non-key column optional)
        assert {k: v for k, v in ours[col].items() if k != "optional"} == {
            k: v for k, v in real_fields[col].items() if k != "optional"
        }
    assert E.dec_b64(12962) == '"MqI="' and E.dec_b64(0) == '"AA=="' and E.dec_b64(-1) == '"/w=="'
    assert E.dec_b64(128) == '"AIA="'  # 0x0080: a leading zero byte keeps it positive


# ----------------------------------------------------------------------------------------------- ground truth
def test_encoding_choices_change_bytes_not_the_events(mixed: Path, json_only: Path, plain: Path) -> None:
    summaries = [_summary(r) for r in (mixed, json_only, plain)]
    for key in ("truth", "delayed_files"):
        if key == "delayed_files":
            assert len(summaries[0][key]) == len(summaries[2][key])
            continue
        assert summaries[0][key] == summaries[1][key] == summaries[2][key]
    for topic, t in summaries[2]["topics"].items():
        for field in (
            "events",
            "ops",
            "duplicates",
            "late_beyond_injected",
            "late_within_injected",
            "tip_amount_events",
        ):
            assert summaries[0]["topics"][topic][field] == summaries[1]["topics"][topic][field] == t[field], (
                topic,
                field,
            )
    assert summaries[1]["per_hour"] == summaries[2]["per_hour"]  # precise decimals: same lines, other bytes
    assert summaries[0]["totals"]["avro_files"] > 0 and summaries[1]["totals"]["avro_files"] == 0


def test_avro_container_round_trip() -> None:
    """A container of the generator's records reads back (fastavro) with its codec, one block and its sync marker,
    decimals and timestamps in every encoding a JSON line has; an unsupported codec is refused."""
    cols = A.columns("orders", ("tip_amount",))
    env = {
        "before": {"order_id": 9},  # a key-only before image: the other columns are their types' placeholders
        "after": {"order_id": 9, "tenant_id": "t", "courier_id": None, "region": "r", "status": "created",
                  "total_amount": "129.62", "delivery_fee": -1.29, "created_at": 0, "promised_at": E.iso(1),
                  "delivered_at": None, "updated_at": E.iso(2), "tip_amount": '"MqI="'[1:-1]},
        "source": {"version": "v", "connector": "postgresql", "name": "oltp", "ts_ms": 5, "snapshot": "false",
                   "db": "oltp", "sequence": None, "schema": "public", "table": "orders", "txId": 1, "lsn": 2,
                   "xmin": None},
        "op": "u",
        "ts_ms": 6,
    }  # fmt: skip
    sync = A.sync_marker("x.avro")
    for codec in A.CODECS:
        data = A.container(A.writer_schema("orders", ("tip_amount",)), [A.record(env, cols)] * 3, codec, sync)
        assert data.endswith(sync)
        blocks = list(fastavro.block_reader(BytesIO(data)))
        assert [b.num_records for b in blocks] == [3] and blocks[0].codec == codec
        rec = next(iter(blocks[0]))
        after, before = rec["after"], rec["before"]
        assert (after["total_amount"], after["delivery_fee"], after["tip_amount"]) == tuple(
            map(Decimal, ("129.62", "-1.29", "129.62"))
        )
        assert after["created_at"] == "1970-01-01T00:00:00.000000Z" and after["courier_id"] is None
        assert before["total_amount"] == 0 and before["created_at"] == "1970-01-01T00:00:00Z"
    with pytest.raises(ValueError, match="avro codec 'snappy'"):
        A.container({}, [], "snappy", b"0" * 16)


def test_same_seed_same_avro_bytes(tmp_path: Path, mixed: Path) -> None:
    generate(tmp_path, CONFIG)
    for path in sorted((mixed / "topics").rglob("*.avro")):
        assert (tmp_path / path.relative_to(mixed)).read_bytes() == path.read_bytes()


def test_every_contract_column_lands_in_json_and_in_avro(mixed: Path) -> None:
    """The generator's encoders derive from lib/contract.py: every column of every CDC table (and its added columns)
    is in the JSON row images and in the Avro records, in the contract's order."""
    con = load_extensions(duckdb.connect())
    for table in CDC_TABLES:
        source = contract.SOURCES[table]
        want = [c.name for c in (*source.columns, *source.added_columns)]
        json_keys: set[str] = set()
        for path in sorted((mixed / "topics" / source.topic).rglob("*.json*")):
            for raw in _lines(path):
                env = _envelope(raw)
                if env is not None and isinstance(env.get("after"), dict):
                    json_keys.update(env["after"])
                    assert [k for k in want if k in env["after"]] == list(env["after"]), (table, raw)
        avro_keys: set[str] = set()
        for path in sorted((mixed / "topics" / source.topic).rglob("*.avro")):
            for rec in _avro_records(con, path):
                if rec["after"] is not None:
                    avro_keys.update(rec["after"])
        assert json_keys == avro_keys == set(want), (table, json_keys, avro_keys)


def test_a_column_added_to_the_contract_is_in_the_avro_schema_and_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the contract with one more column: the writer schema and the records carry it, typed by it."""
    source = contract.SOURCES["payments"]
    fee = contract.SourceColumn("fee", contract.MONEY, "A new column.", nullable=True)
    monkeypatch.setitem(contract.SOURCES, "payments", replace(source, columns=(*source.columns, fee)))
    schema = A.writer_schema("payments")
    field = schema["fields"][0]["type"][1]["fields"][-1]
    assert field["name"] == "fee" and field["type"][1]["logicalType"] == "decimal" and field["default"] is None
    env = {
        "before": None,
        "after": {"payment_id": 1, "order_id": 2, "amount": "3.00", "method": "pix", "status": "captured",
                  "created_at": 0, "updated_at": 0, "fee": "0.25"},
        "source": {"version": "v", "connector": "postgresql", "name": "oltp", "ts_ms": 5, "snapshot": "false",
                   "db": "oltp", "sequence": None, "schema": "public", "table": "payments", "txId": 1, "lsn": 2,
                   "xmin": None},
        "op": "c",
        "ts_ms": 6,
    }  # fmt: skip
    data = A.container(schema, [A.record(env, A.columns("payments"))], "null", A.sync_marker("p.avro"))
    (rec,) = list(fastavro.reader(BytesIO(data)))
    assert rec["after"]["fee"] == Decimal("0.25")
