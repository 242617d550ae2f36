"""The saved sample of the real engine's output (tests/debezium/fixtures/) is complete and reads as it was written."""

from __future__ import annotations

import json
from pathlib import Path

from logistics_platform.lib.capture.schema import TABLES
from logistics_platform.lib.connections import connect

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOPICS = sorted(f"oltp.public.{t}" for t in TABLES)
JSON_CONFIGS = ("string-json", "string-json-schemas", "precise-json", "precise-json-schemas")


def envelopes(config: str, topic: str) -> list[dict[str, object]]:
    lines = (FIXTURES / config / f"{topic}.jsonl").read_bytes().splitlines()
    values = [json.loads(line) for line in lines]
    return [v["payload"] if "schema" in v else v for v in values]


def test_every_config_has_every_topic_with_its_ops() -> None:
    for config in JSON_CONFIGS:
        assert sorted(p.stem for p in (FIXTURES / config).glob("*.jsonl")) == TOPICS, config
        for topic in TOPICS:
            ops = [e["op"] for e in envelopes(config, topic)]
            if config.endswith("-schemas"):  # an insert per topic, and an order's delete
                assert ops == (["c", "d"] if topic == "oltp.public.orders" else ["c"]), (config, topic)
            else:
                assert {"c", "u", "d"} <= set(ops), (config, topic)
    assert sorted(p.stem for p in (FIXTURES / "precise-avro").glob("*.avro")) == TOPICS


def test_the_avro_containers_hold_the_records_of_the_same_engines_json() -> None:
    duck = connect()
    try:
        for topic in TOPICS:
            read = duck.execute(
                f"select op, source.lsn from read_avro('{FIXTURES / 'precise-avro' / f'{topic}.avro'}')"
            ).fetchall()
            expected = [(e["op"], e["source"]["lsn"]) for e in envelopes("precise-json", topic)]  # type: ignore[index]
            assert read == expected, topic
    finally:
        duck.close()
