"""The project's own `capture` against the real Debezium 3.6 connector (#27): one workload on one cluster, captured
by both (each with its own slot and publication), compared per table field for field where the contract reads them.

Compared, per topic in offset order: the sequence of records (tombstones included), ``op``, the key, ``before``'s
key on ``u``/``d`` (``before`` is null on ``c``, ``r`` and, with ``REPLICA IDENTITY DEFAULT``, on ``u``), every
contract column of ``after`` as written and decoded to Python values (Decimal, datetime; the unchanged-TOAST
placeholder as is), ``source.lsn``, ``source.txId``, ``source.ts_ms``/``ts_us``/``ts_ns``, ``source.sequence``,
``source.snapshot``, the presence of the envelope's ``ts_ms``/``ts_us``/``ts_ns``, and the names and order of the
envelope's and ``source``'s fields. Snapshot rows are compared by key, ``op``, ``after``, flag and the null head of
``sequence``; their ``lsn``, ``ts_ms`` and ``txId`` are each snapshot's own (two slots, two snapshot transactions)
and are checked for their shape: one value per snapshot, below every streamed change. Not compared: the values of
the envelope's ``ts_ms``/``ts_us``/``ts_ns`` (when each engine processed the change), ``before``'s non-key columns
on a delete (the connector fills them with type placeholders, capture writes the key only; the contract reads only
the key), and ``source.version`` (``3.6.3.Final`` against capture's own). docs/capture.md records the differences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.lib.bronze.landing import list_arrival_hours, list_hour_files
from logistics_platform.lib.capture.replication import capture_logical
from logistics_platform.lib.capture.schema import KEYS, TABLES
from tests.debezium.workload import TOAST_COURIER, TOAST_TENANT, oltp_database, workload
from tests.support.debezium import ENGINE_MARKS, ConverterConfig, Database, capture

pytestmark = [*ENGINE_MARKS, pytest.mark.postgres]

# Capture writes numerics as decimal strings: the connector's decimal.handling.mode=string.
STRING_JSON = ConverterConfig("string", "json", schemas_enable=False)
SLOT = "capture_cmp"
NUMERIC = frozenset({"total_amount", "delivery_fee", "amount"})
PLACEHOLDER = "__debezium_unavailable_value"
Envelope = dict[str, Any] | None  # None: a tombstone


@dataclass
class Streams:
    """Per topic, the records in offset order: the connector's and capture's."""

    connector: dict[str, list[Envelope]]
    capture: dict[str, list[Envelope]]


def _dsn(db: Database) -> str:
    return f"host={db.host} port={db.port} dbname={db.dbname} user={db.user} password={db.password}"


def _landed(landing: Path) -> dict[str, list[Envelope]]:
    """Every landed line per topic, in arrival-hour then offset order (the capture's Kafka order)."""
    out: dict[str, list[Envelope]] = {}
    for hour in list_arrival_hours(landing):
        for topic_dir in sorted((landing / "topics").iterdir()):
            for f in list_hour_files(landing, topic_dir.name, hour):
                out.setdefault(f.topic, []).extend(json.loads(line) for line in f.path.read_text().splitlines())
    return out


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory) -> Streams:
    """The workload captured by the connector and by capture, both slots created before it (same snapshot)."""
    landing = tmp_path_factory.mktemp("capture_landing")
    with oltp_database() as db:
        # Capture's slot and snapshot first: the pre-existing tenants and couriers, as the connector will see them.
        first = capture_logical(_dsn(db), landing, SLOT, SLOT)
        assert first.created_slot and first.changes == 0
        captured = capture(db, [STRING_JSON], workload)[STRING_JSON]
        capture_logical(_dsn(db), landing, SLOT, SLOT)  # drains the workload
    connector: dict[str, list[Envelope]] = {}
    for r in captured.records:
        connector.setdefault(r.topic, []).append(None if r.value is None else json.loads(r.value))
    return Streams(connector, _landed(landing))


def _table(topic: str) -> str:
    return topic.rsplit(".", 1)[1]


def decoded(row: dict[str, Any] | None, table: str) -> dict[str, Any] | None:
    """The contract's columns of a row image as Python values: numerics Decimal, timestamps aware datetimes."""
    if row is None:
        return None
    out: dict[str, Any] = {}
    for column in TABLES[table]:
        value = row[column]
        if value is not None and value != PLACEHOLDER:
            if column in NUMERIC:
                value = Decimal(value)
            elif column.endswith("_at"):
                value = datetime.fromisoformat(value)
        out[column] = value
    return out


def compared(e: Envelope, table: str, first_tx: int | None = None) -> dict[str, Any] | None:
    """The fields of one record as compared between the two engines.

    ``first_tx``: the workload's first transaction, whose ``sequence`` head differs by design: the connector's
    publication holds every table, so its last commit before it is the harness's marker row, which capture's
    publication (the contract's four tables) does not stream.
    """
    if e is None:
        return None
    key = KEYS[table]
    before = e["before"]
    fields: dict[str, Any] = {
        "op": e["op"],
        "key": (e["after"] or before)[key],
        "before_key": None if before is None else before[key],
        "after": decoded(e["after"], table),
        "after_text": e["after"],  # and as written: the same text, not only the same values
        "snapshot": e["source"]["snapshot"],
        "ts_present": all(isinstance(e.get(f), int) for f in ("ts_ms", "ts_us", "ts_ns")),
        "fields": (tuple(e), tuple(e["source"])),  # which fields, in which order
    }
    source = e["source"]
    if e["op"] == "r":
        fields["sequence_head"] = json.loads(source["sequence"])[0]
    else:
        fields |= {f: source[f] for f in ("lsn", "txId", "ts_ms", "ts_us", "ts_ns", "sequence")}
        if source["txId"] == first_tx:
            fields["sequence"] = json.loads(source["sequence"])[1]
    return fields


def _difference(i: int, ours: dict[str, Any] | None, theirs: dict[str, Any] | None) -> str:
    """Record ``i``'s differing fields as (capture, connector), long values cut."""
    if ours is None or theirs is None:
        return f"record {i}: {str(ours)[:80]} / {str(theirs)[:80]}"
    fields = {
        k: (str(ours.get(k))[:80], str(theirs.get(k))[:80]) for k in ours | theirs if ours.get(k) != theirs.get(k)
    }
    return f"record {i} (key {ours['key']}, op {ours['op']}): {fields}"


def _snapshot_part(records: list[Envelope]) -> list[dict[str, Any]]:
    return [e for e in records if e is not None and e["op"] == "r"]


def _streamed_part(records: list[Envelope]) -> list[Envelope]:
    return [e for e in records if e is None or e["op"] != "r"]


def test_both_captured_every_contract_topic_and_the_workload_s_shapes(streams: Streams) -> None:
    for engine in (streams.connector, streams.capture):
        assert {_table(t) for t in engine if t.startswith("oltp.public.") and _table(t) in TABLES} == set(TABLES)
    ops = {(_table(t), e["op"]) for t, rs in streams.capture.items() for e in rs if e is not None}
    assert {t for t, op in ops if op == "r"} == {"tenants", "couriers"}
    assert all((t, op) in ops for t in TABLES for op in ("c", "u", "d"))


@pytest.mark.parametrize("table", list(TABLES))
def test_the_streamed_records_are_the_connector_s(streams: Streams, table: str) -> None:
    """Same records in the same order (tombstones included), each the same in every field the contract reads."""
    topic = f"oltp.public.{table}"
    first_tx = min(e["source"]["txId"] for rs in streams.capture.values() for e in _streamed_part(rs) if e)
    theirs = [compared(e, table, first_tx) for e in _streamed_part(streams.connector[topic])]
    ours = [compared(e, table, first_tx) for e in _streamed_part(streams.capture[topic])]
    assert len(ours) == len(theirs)
    diffs = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]
    assert not diffs, f"{len(diffs)} of {len(ours)} differ, first: {_difference(*diffs[0])}"


@pytest.mark.parametrize("table", ["tenants", "couriers"])
def test_the_snapshot_rows_are_the_connector_s(streams: Streams, table: str) -> None:
    topic = f"oltp.public.{table}"
    theirs = [compared(e, table) for e in _snapshot_part(streams.connector[topic])]
    ours = [compared(e, table) for e in _snapshot_part(streams.capture[topic])]
    assert ours and ours == theirs


def test_snapshot_rows_share_one_lsn_ts_ms_and_tx_id_below_every_streamed_change(streams: Streams) -> None:
    for engine in (streams.connector, streams.capture):
        snap = [e for rs in engine.values() for e in _snapshot_part(rs)]
        streamed = [e for rs in engine.values() for e in _streamed_part(rs) if e is not None]
        assert len({(e["source"]["lsn"], e["source"]["ts_ms"], e["source"]["txId"]) for e in snap}) == 1
        (lsn, _ts, tx_id) = (snap[0]["source"][f] for f in ("lsn", "ts_ms", "txId"))
        assert isinstance(tx_id, int) and lsn < min(e["source"]["lsn"] for e in streamed)


def test_an_unchanged_toasted_text_column_is_the_placeholder_in_both(streams: Streams) -> None:
    for table, key, column in (("tenants", TOAST_TENANT, "name"), ("couriers", TOAST_COURIER, "name")):
        topic = f"oltp.public.{table}"
        for engine in (streams.connector, streams.capture):
            values = [e["after"][column] for e in engine[topic] if e and e["after"] and e["after"][KEYS[table]] == key]
            assert len(values) == 2 and len(values[0]) == 3_000 and values[1] == PLACEHOLDER, (table, values[1][:40])
