"""Avro landing files (the Confluent sink's AvroFormat): the same bronze rows as the same events in JSON Lines.

Files land in the current (open) arrival hour on the real clock, as a live sink writes them. Containers are written
by tests/support (codecs null, deflate, snappy; blocks of a few records), their datums encoded from the same
envelopes the JSON files hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.cli import main
from logistics_platform.defs.bronze.checks import CHECK_ACCOUNTING, bronze_check_results
from logistics_platform.defs.bronze.keys import TOPIC_KEYS
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.accounting import account_ingest
from logistics_platform.lib.bronze.avro_container import count_records, walk_bytes
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import hour_dir, list_arrival_hours, list_hour_files
from logistics_platform.lib.bronze.unread import unread_files, unread_in_hour
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.lib.contract import MONEY
from logistics_platform.lib.timekeys import hour_start
from logistics_platform.pipeline import landed_partitions
from logistics_platform.settings import Settings, local_settings
from tests.support.avro_encode import avro_record, envelope_schema, plain_schema
from tests.support.bronze import account_hour, cdc, dump, iso, order, ping, write_file
from tests.support.connect_sink import avro_container, sync_marker

ORDERS, PINGS, TENANTS = "oltp.public.orders", "logistics.tracking_pings", "oltp.public.tenants"
FIXTURES = Path(__file__).parents[1] / "debezium" / "fixtures"
DATA_TABLES = [*bs.TOPICS]


def open_hour() -> datetime:
    return hour_start(datetime.now(UTC))


def write_avro(
    landing: Path,
    topic: str,
    hour: datetime,
    partition: int,
    offset: int,
    values: list[dict[str, Any]],
    *,
    codec: str = "null",
    block_records: int | None = 3,
    schema: dict[str, Any] | None = None,
) -> Path:
    """An Avro container of ``values`` (JSON envelopes, or ping rows) as the sink names and writes it."""
    spec = bs.TOPIC_BY_NAME[topic]
    schema = schema or (envelope_schema(spec) if spec.cdc else plain_schema(spec))
    folder = landing / hour_dir(topic, hour)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topic}+{partition}+{offset:010d}.avro"
    records = [avro_record(schema, v) for v in values]
    path.write_bytes(avro_container(schema, records, sync_marker(path.name), codec, block_records))
    return path


def events(hour: datetime) -> dict[str, list[dict[str, Any]]]:
    """Envelopes of every kind: c/u/d/r, edge amounts, short fractions, a late event, and records to quarantine."""
    t = hour + timedelta(minutes=1)
    late = hour - timedelta(hours=5)
    orders = [
        cdc("r", "orders", order(1, t), lsn=100, ts=t),
        cdc("c", "orders", order(2, t, total_amount="0.01", delivery_fee="-5.00"), lsn=110, ts=t),
        cdc("c", "orders", order(3, t, total_amount="9999999999.99", courier_id=9), lsn=120, ts=t),
        cdc("u", "orders", order(2, t, status="assigned", updated_at="2026-12-02T01:02:03.5Z"), lsn=130, ts=t),
        cdc("d", "orders", None, before={"order_id": 3}, lsn=140, ts=t),
        cdc("c", "orders", order(4, late), lsn=150, ts=late),
        # to quarantine, as in JSON: op, envelope, value and key failures
        {**cdc("c", "orders", order(5, t), lsn=160, ts=t), "op": "x"},
        cdc("c", "orders", None, lsn=170, ts=t),
        # more digits than any promotion holds (an amount that only needs a wider column promotes it)
        cdc("c", "orders", order(6, t, total_amount="1" + "0" * 38 + ".00"), lsn=180, ts=t),
        cdc("c", "orders", order(7, t, created_at="yesterday"), lsn=190, ts=t),
        cdc("c", "orders", order(8, t, updated_at="2026-02-30T00:00:00Z"), lsn=200, ts=t),
    ]
    tenants = [
        cdc("c", "tenants", {"tenant_id": "t1", "name": "A", "tier": "gold", "region": "n", "updated_at": iso(t)},
            lsn=300, ts=t),
        cdc("c", "tenants", {"tenant_id": "", "name": "B", "tier": "gold", "region": "n", "updated_at": iso(t)},
            lsn=310, ts=t),
    ]  # fmt: skip
    pings = [ping(f"p{i}", t, lat=-23.5 + i / 8, order_id=None if i % 2 else i) for i in range(7)]
    return {ORDERS: orders, TENANTS: tenants, PINGS: pings}


def land_json(landing: Path, hour: datetime, data: dict[str, list[dict[str, Any]]]) -> None:
    for topic, values in data.items():
        lines = [json.dumps(v).encode() for v in values]
        write_file(landing, topic, hour, 0, 0, lines)


def land_avro(landing: Path, hour: datetime, data: dict[str, list[dict[str, Any]]], codec: str = "null") -> None:
    for topic, values in data.items():
        write_avro(landing, topic, hour, 0, 0, values, codec=codec)


def except_all(left: Settings, right: Settings, table: str, columns: str) -> tuple[list[Any], list[Any]]:
    con = connect()
    try:
        a = load_catalog(left).load_table(f"bronze.{table}").metadata_location
        b = load_catalog(right).load_table(f"bronze.{table}").metadata_location
        q = f"select {columns} from iceberg_scan(?) except all select {columns} from iceberg_scan(?)"
        return con.execute(q, [a, b]).fetchall(), con.execute(q, [b, a]).fetchall()
    finally:
        con.close()


def count(settings: Settings, table: str, where: str = "true") -> int:
    con = connect()
    try:
        loc = load_catalog(settings).load_table(f"bronze.{table}").metadata_location
        return int(con.execute(f"select count(*) from iceberg_scan(?) where {where}", [loc]).fetchone()[0])
    finally:
        con.close()


def assert_same(json_side: Settings, avro_side: Settings) -> None:
    for table in DATA_TABLES:
        spec = bs.TOPICS[table]
        cols = ", ".join(c.name for c in (*spec.columns, *bs.metadata_columns(spec)) if c.name != "_source_file")
        only_json, only_avro = except_all(json_side, avro_side, table, cols)
        assert not only_json and not only_avro, f"{table}: json only {only_json[:2]}, avro only {only_avro[:2]}"
    cols = "_topic, _kafka_partition, _offset, _arrival_hour, reason"
    only_json, only_avro = except_all(json_side, avro_side, bs.QUARANTINE_TABLE, cols)
    assert not only_json and not only_avro, f"quarantine: json only {only_json}, avro only {only_avro}"


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy"])
def test_the_same_events_as_json_and_as_avro_give_the_same_bronze_rows(tmp_path: Path, codec: str) -> None:
    hour = open_hour()
    data = events(hour)
    j = local_settings(tmp_path / "json")
    a = local_settings(tmp_path / "avro")
    land_json(j.landing_dir, hour, data)
    land_avro(a.landing_dir, hour, data, codec)
    assert list_arrival_hours(a.landing_dir) == [hour]
    rj, ra = ingest_hour(j, hour), ingest_hour(a, hour)
    assert_same(j, a)
    orders = ra.topics["orders"]
    assert (orders.lines, orders.rows, orders.quarantined, orders.tombstones) == (11, 6, 5, 0)
    assert orders.quarantined_by_reason == rj.topics["orders"].quarantined_by_reason
    assert ra.topics["tracking_pings"].rows == 7
    assert count(a, "orders", "_is_late") == 1
    # A quarantined record keeps its JSON rendering (decimals as Connect Decimals, base64).
    con = connect()
    try:
        loc = load_catalog(a).load_table("bronze.quarantine").metadata_location
        raw = con.execute(
            "select raw_line, raw_encoding from iceberg_scan(?) where reason = 'invalid_value:total_amount'", [loc]
        ).fetchone()
    finally:
        con.close()
    assert raw[1] == "utf-8" and json.loads(raw[0])["after"]["order_id"] == 6
    accounts = account_hour(a, hour)
    assert all(acc.balanced for acc in accounts.values()), accounts
    assert accounts["orders"].lines == 11 and accounts["orders"].tombstones == 0


def test_the_real_connectors_avro_gives_the_rows_of_its_json(tmp_path: Path) -> None:
    """Debezium 3.6's own AvroConverter output and the JsonConverter output of the same engine and records."""
    hour = open_hour()
    j = local_settings(tmp_path / "json")
    a = local_settings(tmp_path / "avro")
    for topic in (p.stem for p in (FIXTURES / "precise-avro").glob("*.avro")):
        lines = (FIXTURES / "precise-json" / f"{topic}.jsonl").read_bytes().splitlines()
        write_file(j.landing_dir, topic, hour, 0, 0, lines)
        folder = a.landing_dir / hour_dir(topic, hour)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{topic}+0+0000000000.avro").write_bytes((FIXTURES / "precise-avro" / f"{topic}.avro").read_bytes())
    ingest_hour(j, hour)
    ra = ingest_hour(a, hour)
    assert_same(j, a)
    assert ra.topics["orders"].rows > 0 and ra.topics["orders"].quarantined == 0


def test_a_schema_change_between_files_and_json_in_the_same_hour(tmp_path: Path) -> None:
    """orders gains tip_amount in a later Avro file; a JSON file of the same topic lands in the same hour."""
    hour = open_hour()
    t = hour + timedelta(minutes=2)
    s = local_settings(tmp_path)
    spec = bs.TOPIC_BY_NAME[ORDERS]
    tip = bs.Column("tip_amount", bs.iceberg_type(MONEY), "tip")
    write_avro(s.landing_dir, ORDERS, hour, 0, 0, [cdc("c", "orders", order(i, t), lsn=i, ts=t) for i in range(1, 4)])
    later = [cdc("c", "orders", order(i, t, tip_amount="2.50"), lsn=i, ts=t) for i in range(4, 8)]
    write_avro(s.landing_dir, ORDERS, hour, 0, 3, later, schema=envelope_schema(spec, (tip,)), codec="deflate")
    write_file(s.landing_dir, ORDERS, hour, 1, 0, [dump(cdc("c", "orders", order(9, t), lsn=9, ts=t))])
    r = ingest_hour(s, hour)
    assert "tip_amount" in r.topics["orders"].added_columns
    assert (r.topics["orders"].lines, r.topics["orders"].rows) == (8, 8)
    con = connect()
    try:
        loc = load_catalog(s).load_table("bronze.orders").metadata_location
        tips = con.execute(
            "select order_id, tip_amount from iceberg_scan(?) where tip_amount is not null order by 1", [loc]
        ).fetchall()
    finally:
        con.close()
    # As the JsonConverter writes the same Decimal (precise mode): its base64, kept as text by the added column.
    assert tips == [(i, "APo=") for i in range(4, 8)]
    assert all(acc.balanced for acc in account_hour(s, hour).values())


def test_a_damaged_container_keeps_its_readable_records_and_is_one_corrupt_file_row(tmp_path: Path) -> None:
    hour = open_hour()
    t = hour + timedelta(minutes=3)
    s = local_settings(tmp_path)
    values = [cdc("c", "orders", order(i, t), lsn=i, ts=t) for i in range(1, 11)]
    cut = write_avro(s.landing_dir, ORDERS, hour, 0, 0, values, codec="deflate")
    data = cut.read_bytes()
    blocks = walk_bytes(data).blocks
    cut.write_bytes(data[: blocks[2].start + 7])  # an upload cut short inside the third block
    flipped = write_avro(s.landing_dir, ORDERS, hour, 0, 10, values)
    raw = bytearray(flipped.read_bytes())
    b = walk_bytes(bytes(raw)).blocks[1]
    raw[(b.start + b.end) // 2] ^= 0xFF  # a damaged byte inside the second block: DuckDB alone would skip it
    flipped.write_bytes(bytes(raw))
    write_avro(s.landing_dir, ORDERS, hour, 0, 20, values[:2])
    assert count_records(cut) == (6, count_records(cut)[1]) and count_records(cut)[1]
    r = ingest_hour(s, hour)
    orders = r.topics["orders"]
    assert sorted(orders.corrupt_files) == sorted(p.relative_to(s.landing_dir).as_posix() for p in (cut, flipped))
    assert orders.rows == 6 + 3 + 2 and orders.quarantined == 0
    assert count(s, bs.QUARANTINE_TABLE, f"reason = '{bs.REASON_CORRUPT_FILE}'") == 2
    assert all(acc.balanced for acc in account_hour(s, hour).values())


def test_open_hour_append_of_new_avro_files_exactly_once(tmp_path: Path) -> None:
    hour = open_hour()
    t = hour + timedelta(minutes=4)
    s = local_settings(tmp_path)
    write_avro(s.landing_dir, ORDERS, hour, 0, 0, [cdc("c", "orders", order(i, t), lsn=i, ts=t) for i in range(3)])
    first = ingest_hour(s, hour)
    assert first.mode == "replace"
    write_avro(s.landing_dir, ORDERS, hour, 0, 3, [cdc("c", "orders", order(i, t), lsn=i, ts=t) for i in range(3, 5)])
    second = ingest_hour(s, hour)
    assert second.mode == "append" and second.topics["orders"].read_files == [
        (f"{hour_dir(ORDERS, hour)}/{ORDERS}+0+0000000003.avro", list_hour_files(s.landing_dir, ORDERS, hour)[1].size)
    ]
    accounts = account_ingest(s, [second])[hour]
    assert accounts["orders"].lines == 2 and accounts["orders"].balanced
    assert ingest_hour(s, hour).mode == "unchanged"
    assert count(s, "orders") == 5
    assert count(s, "orders", "_offset between 0 and 4") == 5


def test_files_the_platform_does_not_read_are_reported_with_their_paths(
    tmp_path: Path, cli_env: Callable[[Settings], None], capsys: pytest.CaptureFixture[str]
) -> None:
    hour = open_hour()
    t = hour + timedelta(minutes=5)
    s = local_settings(tmp_path)
    values = [cdc("c", "orders", order(1, t), lsn=1, ts=t)]
    write_avro(s.landing_dir, ORDERS, hour, 0, 0, values)
    folder = s.landing_dir / hour_dir(ORDERS, hour)
    strays = {
        f"{ORDERS}+0+0000000000.keys.avro": "keys",
        f"{ORDERS}+0+0000000000.headers.avro": "headers",
        f"{ORDERS}+0+0000000001.json.bz2": "file name",
        f"{ORDERS}+0+0000000002.bin": "file name",
    }
    for name in strays:
        (folder / name).write_bytes(b"x")
    (s.landing_dir / "topics" / "stray.txt").write_bytes(b"x")
    (folder / "+tmp").mkdir()
    (folder / "+tmp" / "upload.part").write_bytes(b"x")  # a sink's temporary folder: not reported
    every = unread_files(s.landing_dir)
    assert sorted(every) == sorted([*(f"{hour_dir(ORDERS, hour)}/{n}" for n in strays), "topics/stray.txt"])
    for name, word in strays.items():
        assert word in every[f"{hour_dir(ORDERS, hour)}/{name}"]
    in_hour = sorted(unread_in_hour(s.landing_dir, ORDERS, hour))
    assert in_hour == sorted(f"{hour_dir(ORDERS, hour)}/{n}" for n in strays)
    # A double that JSON cannot carry, but Avro can: refused by the column's check.
    write_avro(s.landing_dir, PINGS, hour, 0, 0, [ping("p1", t), ping("p-nan", t, speed_kmh=float("nan"))])
    r = ingest_hour(s, hour)
    assert r.topics["orders"].rows == 1
    assert r.topics["tracking_pings"].quarantined_by_reason == {"invalid_value:speed_kmh": 1}
    # verify, the accounting check's account and run's summary name every one of them
    cli_env(s)
    main(["verify"])
    out = capsys.readouterr().out
    assert f"files not read: {len(every)}" in out and all(f"    {p}: " in out for p in every)
    account = account_hour(s, hour)["orders"]
    assert account.balanced and dict(account.unread_files) == {p: every[p] for p in in_hour}
    assert "unread_files" in account.as_dict()
    _, skipped = landed_partitions(s, datetime.now(UTC))
    assert set(every) <= set(skipped)
    results = bronze_check_results([r], {hour: account_hour(s, hour)})
    check = next(c for c in results if c.asset_key == TOPIC_KEYS["orders"] and c.check_name == CHECK_ACCOUNTING)
    assert not check.passed and all(p in (check.description or "") for p in in_hour)


@pytest.mark.parametrize("codec", ["null", "snappy"])
def test_the_vectorised_path_gives_the_line_parsers_rows(tmp_path: Path, codec: str) -> None:
    """Every record read vectorised equals the same record through the line parser (the source of truth)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from logistics_platform.lib.bronze.avro import read_file
    from logistics_platform.lib.bronze.envelope import LineParser

    hour = open_hour()
    land_avro(tmp_path, hour, events(hour), codec)
    for (spec, path) in [(bs.TOPIC_BY_NAME[t], p) for t in (ORDERS, TENANTS, PINGS) for p in
                         (tmp_path / hour_dir(t, hour)).iterdir()]:  # fmt: skip
        f = next(x for x in list_hour_files(tmp_path, spec.topic, hour) if x.path == path)
        parser = LineParser(spec, hour, 7200)
        schema = schema_to_pyarrow(bs.table_schema(spec))
        fast, _ = read_file(parser, f, schema)
        slow, _ = read_file(parser, f, schema, vectorised=False)
        rows = sorted(fast.rows.to_pylist(), key=lambda r: r["_offset"])
        assert rows == sorted(slow.rows.to_pylist(), key=lambda r: r["_offset"])
        assert sorted(fast.quarantine) == sorted(slow.quarantine)
        assert fast.late == slow.late and fast.lines == slow.lines


# One value per record, in both encodings the contract allows: every parse path must give it the same outcome.
SAME_TIMESTAMPS = [
    "2026-11-01T00:00:00Z",
    "2026-11-01T00:00:00.5Z",
    "2026-11-01T00:00:00.12345Z",
    "2026-11-01T00:00:00.123456Z",
    "2026-11-01T00:00:00.1234567Z",
    "2026-11-01T00:00:00.Z",
    "2026-11-01T00:00:00+00:00",
    "2026-11-01T03:00:00+03:00",
    "2026-11-01 00:00:00Z",
    "2026-02-30T00:00:00Z",
    "2026-11-01T24:00:00Z",
    "yesterday",
]
# 41 digits: beyond the widest decimal a column is promoted to (a wider amount promotes it: test_promote.py).
SAME_AMOUNTS = ["10.50", "10.5", "10.505", "0.001", "-0.01", "0", "9999999999.99", "1" + "0" * 38 + ".00"]
SAME_AMOUNTS += ["-9999999999.99"]


def test_one_value_gives_one_result_on_every_path(tmp_path: Path) -> None:
    """A timestamp or decimal gives the same bronze row or quarantine reason through the line parser, the JSON fast
    path (with its isolation of odd lines) and Avro (decimals as ``bytes`` of scale 3, so every amount is exact)."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    from logistics_platform.lib.bronze.avro import read_file
    from logistics_platform.lib.bronze.blocks import BlockTask
    from logistics_platform.lib.bronze.envelope import LineParser
    from logistics_platform.lib.bronze.pool import run_block

    hour = open_hour()
    t = hour + timedelta(minutes=1)
    values = [order(1, t)] * 40  # clean lines around the odd ones, so that the fast path reads the block
    values += [order(100 + i, t, created_at=v) for i, v in enumerate(SAME_TIMESTAMPS)]
    values += [order(200 + i, t, total_amount=v) for i, v in enumerate(SAME_AMOUNTS)]
    envelopes = [cdc("c", "orders", v, lsn=1000 + 10 * i, ts=t) for i, v in enumerate(values)]
    spec = bs.TOPIC_BY_NAME[ORDERS]
    schema = schema_to_pyarrow(bs.table_schema(spec), include_field_ids=True)
    parser = LineParser(spec, hour, 7200)
    lines = [json.dumps(e).encode() for e in envelopes]

    def outcomes(rows: Any, quarantine: list[tuple[Any, ...]]) -> dict[int, Any]:
        out: dict[int, Any] = {q[2]: q[5] for q in quarantine}  # offset -> reason
        for r in [] if rows is None else rows.to_pylist():
            out[r["_offset"]] = {k: v for k, v in r.items() if k != "_source_file"}
        return out

    slow = run_block(BlockTask("orders", hour, 7200, (), schema, b"\n".join(lines), 0, 0, "f.json", 0))
    per_line = outcomes(slow.rows, slow.quarantine)
    assert set(per_line) == set(range(len(lines)))
    fast = run_block(BlockTask("orders", hour, 7200, (), schema, b"\n".join(lines), 0, 0, "f.json", 8192))
    assert fast.fast_lines >= 40  # the vectorised path read the clean lines (and set the odd ones apart)
    assert outcomes(fast.rows, fast.quarantine) == per_line

    avro_schema = envelope_schema(spec)
    row = next(b for f in avro_schema["fields"] for b in f["type"] if isinstance(b, dict) and f["name"] == "before")
    amount = next(f for f in row["fields"] if f["name"] == "total_amount")
    amount["type"] = ["null", {**amount["type"][1], "scale": 3, "connect.parameters": {"scale": "3"}}]
    path = write_avro(tmp_path, ORDERS, hour, 0, 0, envelopes, schema=avro_schema, block_records=None)
    f = next(x for x in list_hour_files(tmp_path, ORDERS, hour) if x.path == path)
    # The writer schema declares the amounts' scale 3: an amount DECIMAL(12,2) cannot take is a schema incident there.
    declared = {
        k: "incompatible_type:total_amount" if v == "invalid_value:total_amount" else v for k, v in per_line.items()
    }
    for vectorised in (True, False):
        result, corrupt = read_file(parser, f, schema, vectorised=vectorised)
        assert corrupt is None
        assert outcomes(result.rows, result.quarantine) == declared, vectorised
    reasons = [per_line[i] for i in range(40, len(lines))]
    assert "invalid_value:created_at" in reasons and "invalid_value:total_amount" in reasons
    assert sum(isinstance(r, dict) for r in reasons) >= 10  # both outcomes are exercised
