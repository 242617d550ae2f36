"""Regenerates tests/debezium/fixtures/: a small sample of what the real Debezium engine writes, per converter config.

``PYTHONPATH=. .venv/bin/python -m tests.debezium.make_fixtures`` (needs a JDK and PostgreSQL 15's binaries): the
workload of workload.py on a throwaway cluster, captured by the real connector. Per config and topic it keeps the
first record of each op (r, c, u, d), the orders with edge amounts and the tenant update whose unchanged TOASTed
name is a placeholder (with ``schemas.enable=true``: an insert per topic and an order's delete). JSON configs as
JSON Lines (``<config>/<topic>.jsonl``), Avro as a container file (``<config>/<topic>.avro``). Timestamps, LSNs
and transaction ids change with every run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import fastavro

from tests.debezium.workload import EDGE_ORDER_ID, oltp_database, workload
from tests.support.connect_sink import avro_container, avro_record, schema_id, sync_marker
from tests.support.debezium import Captured, ConverterConfig, Record, capture

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONFIGS = (
    ConverterConfig("string", "json", schemas_enable=False),
    ConverterConfig("string", "json", schemas_enable=True),
    ConverterConfig("precise", "json", schemas_enable=False),
    ConverterConfig("precise", "json", schemas_enable=True),
    ConverterConfig("precise", "avro"),
)
PLACEHOLDER = b"__debezium_unavailable_value"
ORDERS = "oltp.public.orders"
MAX_BYTES = 100_000  # the whole sample stays small enough to keep in the repository


def _envelope(config: ConverterConfig, r: Record, twin: dict[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    """The record's envelope; an Avro record's from the same engine's JSON twin (no Avro decoder here)."""
    if config.converter == "avro":
        return twin[(r.topic, r.offset)]
    assert r.value is not None
    value = json.loads(r.value)
    return dict(value["payload"] if "schema" in value else value)


def _kind(config: ConverterConfig, r: Record, envelope: dict[str, Any]) -> str | None:
    """Why a record is kept (None: not kept). A line with a schema repeats the table's schema (3-5 KB), so those
    configs keep only an insert per topic and the delete of an order."""
    op = str(envelope["op"])
    if config.schemas_enable:
        return op if op == "c" or (op == "d" and r.topic == ORDERS) else None
    if r.value is not None and PLACEHOLDER in r.value:  # the same bytes in JSON text and in an Avro string
        return "toast"
    if r.topic == ORDERS and op == "c" and envelope["after"]["order_id"] >= EDGE_ORDER_ID:
        return f"edge {envelope['after']['order_id']}"
    return op


def sample(
    config: ConverterConfig, captured: Captured, twin: dict[tuple[str, int], dict[str, Any]]
) -> dict[str, list[Record]]:
    """Per topic, in offset order: the first record of each kind (op, TOAST placeholder, edge amount)."""
    out: dict[str, list[Record]] = {}
    for topic, records in captured.by_topic().items():
        seen: set[str] = set()
        keep = out[topic] = []
        for r in records:
            if r.value is None:
                continue
            kind = _kind(config, r, _envelope(config, r, twin))
            if kind is not None and kind not in seen:
                seen.add(kind)
                keep.append(r)
    return out


def main() -> None:
    """Capture the workload and rewrite the fixtures folder (README.md kept)."""
    with oltp_database() as db:
        captured = capture(db, CONFIGS, workload)
    # Avro payloads carry no op a reader can see without a decoder: take it from the same engine's JSON.
    json_twin = captured[ConverterConfig("precise", "json", schemas_enable=False)]
    twin = {(r.topic, r.offset): _envelope(json_twin.config, r, {}) for r in json_twin.records if r.value is not None}
    for config in CONFIGS:
        folder = FIXTURES / config.name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for topic, records in sample(config, captured[config], twin).items():
            if config.converter == "avro":
                schema = captured[config].schemas[schema_id(records[0])]
                assert len({schema_id(r) for r in records}) == 1, f"{topic}: the writer schema changed"
                name = f"{topic}.avro"
                parsed = fastavro.parse_schema(json.loads(schema))
                avro_records = [avro_record(r, parsed) for r in records]
                (folder / name).write_bytes(avro_container(schema, avro_records, sync_marker(name)))
            else:
                (folder / f"{topic}.jsonl").write_bytes(b"".join(r.value + b"\n" for r in records if r.value))
    total = sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file())
    print(f"fixtures: {total:,} bytes in {FIXTURES}")
    assert total < MAX_BYTES, f"fixtures are {total:,} bytes; keep fewer records per topic"


if __name__ == "__main__":
    main()
