"""The child process of tests/support/debezium.py: Debezium's embedded PostgreSQL connector in a JVM of its own.

Run as ``python -m tests.support.debezium_engine <job.json>``. JPype allows one JVM per process, so the engines run
here and never in the test process. One engine per connector setting (the decimal mode), each with its own slot,
publication, offsets file and metric tags, all in this one JVM. Each engine hands over Kafka Connect
``SourceRecord``s (the engine's ``Connect`` format), and every value converter of the job serialises each record,
as a Kafka Connect worker does before it writes to Kafka: Kafka's ``JsonConverter`` or Confluent's
``AvroConverter`` (with a ``MockSchemaRegistryClient``: no registry server). Kafka offsets are counted per topic,
tombstones included. The parent's rows in a marker table pace the engines: each engine writes ``<name>.ready`` when
it streams the ``start`` row (its snapshot is over), and stops at the ``end`` row written after the workload.

The job file names the connection, the engines and their outputs; the result file (JSON) holds, per output, the
records ``[topic, partition, offset, base64 value or null]`` and, for Avro, the registry's schemas by id.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
from pathlib import Path
from typing import Any

from pydbzengine import BasePythonChangeHandler, DebeziumEngine

# Kafka partition of every record: the embedded engine has no Kafka, and one partition per topic keeps the order.
PARTITION = 0


def _java_map(values: dict[str, Any]) -> Any:
    import jpype

    out = jpype.JClass("java.util.HashMap")()
    for k, v in values.items():
        out.put(k, v)
    return out


class Output:
    """One value converter and the records it serialised."""

    def __init__(self, spec: dict[str, Any]) -> None:
        import jpype

        self.name: str = spec["name"]
        self.kind: str = spec["converter"]
        self.records: list[list[Any]] = []
        self.registry: Any = None
        if self.kind == "json":
            self.converter = jpype.JClass("org.apache.kafka.connect.json.JsonConverter")()
            self.converter.configure(_java_map({"schemas.enable": str(spec["schemas_enable"]).lower()}), False)
        elif self.kind == "avro":
            # Confluent 7.0's converter rejects mock:// URLs; given a client, it never calls the URL it requires.
            self.registry = jpype.JClass("io.confluent.kafka.schemaregistry.client.MockSchemaRegistryClient")()
            self.converter = jpype.JClass("io.confluent.connect.avro.AvroConverter")(self.registry)
            self.converter.configure(_java_map({"schema.registry.url": "http://registry.invalid"}), False)
        else:
            raise ValueError(f"unknown converter {self.kind!r}")

    def add(self, topic: str, offset: int, schema: Any, value: Any) -> None:
        data = None if value is None else bytes(self.converter.fromConnectData(topic, schema, value))
        encoded = None if data is None else base64.b64encode(data).decode("ascii")
        self.records.append([topic, PARTITION, offset, encoded])

    def result(self) -> dict[str, Any]:
        schemas: dict[str, str] = {}
        if self.registry is not None:
            # Confluent's wire format: magic byte 0, the schema id (4 bytes, big-endian), then the Avro datum.
            ids = {int.from_bytes(base64.b64decode(r[3])[1:5], "big") for r in self.records if r[3] is not None}
            schemas = {str(i): str(self.registry.getSchemaById(i).toString()) for i in sorted(ids)}
        return {"records": self.records, "schemas": schemas}


class Collector(BasePythonChangeHandler):
    """The handler of one engine: serialises each record with every output, and watches the marker table."""

    def __init__(self, name: str, outputs: list[Output], marker_topic: str, work: Path) -> None:
        self.name = name
        self.outputs = outputs
        self.marker_topic = marker_topic
        self.ready_file = work / f"{name}.ready"
        self.offsets: dict[str, int] = {}
        self.done = threading.Event()
        self.error: BaseException | None = None

    def handleJsonBatch(self, records: Any) -> None:  # the name (camelCase) pydbzengine's consumer calls
        try:
            for event in records:
                record = event.value()  # in the engine's Connect format, the SourceRecord itself
                topic = str(record.topic())
                if topic == self.marker_topic:
                    self._marker(record.value())
                    continue
                offset = self.offsets.get(topic, 0)
                self.offsets[topic] = offset + 1
                for output in self.outputs:
                    output.add(topic, offset, record.valueSchema(), record.value())
        except BaseException as exc:
            self.error = exc
            self.done.set()
            raise

    def _marker(self, value: Any) -> None:
        # Only a streamed insert counts: it proves the snapshot is over (start) or the workload is in (end).
        if value is None or str(value.getString("op")) != "c":
            return
        label = str(value.getStruct("after").getString("label"))
        if label == "start":
            self.ready_file.write_text("streaming\n")
        elif label == "end":
            self.done.set()


def properties(job: dict[str, Any], engine: dict[str, Any], work: Path) -> dict[str, str]:
    """The connector's configuration: its defaults, except what a deployment must set."""
    conn = job["connection"]
    name = engine["name"]
    props = {
        "name": name,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": conn["host"],
        "database.port": str(conn["port"]),
        "database.user": conn["user"],
        "database.password": conn["password"],
        "database.dbname": conn["dbname"],
        "topic.prefix": job["topic_prefix"],
        "plugin.name": "pgoutput",
        "slot.name": name,
        "publication.name": name,
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(work / f"{name}.offsets"),
        # Engines in one JVM with one topic.prefix would register the same metrics name and stall.
        "custom.metric.tags": f"engine={name}",
    }
    if engine["decimal_mode"] != "precise":
        props["decimal.handling.mode"] = engine["decimal_mode"]
    if job.get("skipped_operations") is not None:  # Debezium's default "t" skips truncates
        props["skipped.operations"] = job["skipped_operations"]
    return props


def main(job_path: str) -> int:
    """Run every engine of the job until each has seen the end marker, then write the result file."""
    from pydbzengine.engine.jvm import ensure_jvm_started  # its import finds the jars; it starts nothing

    job = json.loads(Path(job_path).read_text())
    work = Path(job["work_dir"])

    ensure_jvm_started(jvm_opts=job["jvm_opts"])  # the converters are Java objects too
    marker_topic = f"{job['topic_prefix']}.{job['marker_table']}"
    engines: list[tuple[Any, Collector, threading.Thread]] = []
    for spec in job["engines"]:
        collector = Collector(spec["name"], [Output(o) for o in spec["outputs"]], marker_topic, work)
        engine = DebeziumEngine(properties(job, spec, work), handler=collector, format="connect")
        thread = threading.Thread(target=engine.run, name=spec["name"], daemon=True)
        engines.append((engine, collector, thread))
    for _engine, _collector, thread in engines:
        thread.start()
    for _engine, collector, thread in engines:
        while not collector.done.wait(0.5):
            if not thread.is_alive():
                raise RuntimeError(f"engine {thread.name} stopped before the marker; see the log above")
    for engine, _collector, thread in engines:
        engine.close()
        thread.join(timeout=60)
    errors = [c.error for _e, c, _t in engines if c.error is not None]
    if errors:
        raise errors[0]
    result = {o.name: o.result() for _e, c, _t in engines for o in c.outputs}
    Path(job["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
