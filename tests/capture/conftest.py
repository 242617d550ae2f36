"""A throwaway PostgreSQL 15 cluster with ``wal_level=logical`` (initdb + pg_ctl as the postgres user).

One cluster per test session, each test gets its own database; the cluster is stopped and deleted afterwards.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_BIN = Path("/usr/lib/postgresql/15/bin")


@dataclass(frozen=True)
class Cluster:
    socket_dir: Path
    port: int

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"host={self.socket_dir} port={self.port} dbname={dbname} user={user}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = args if os.geteuid() != 0 else ["su", "postgres", "-c", " ".join(args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A PostgreSQL cluster with wal_level=logical on a free port, unix socket in its temp dir."""
    if not (PG_BIN / "initdb").exists():
        pytest.fail(f"PostgreSQL 15 binaries are not in {PG_BIN}; install postgresql-15")
    root = Path(tempfile.mkdtemp(prefix="capture_pg_"))
    os.chmod(root, 0o755)
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    init = _as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync"])
    assert init.returncode == 0, init.stderr
    opts = (
        f"-c wal_level=logical -c port={port} -c listen_addresses='' -c unix_socket_directories={root} "
        "-c max_replication_slots=20 -c max_wal_senders=20 -c fsync=off -c full_page_writes=off"
    )
    start = _as_postgres(
        [str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-o", f'"{opts}"', "start"]
    )
    assert start.returncode == 0, start.stderr + (root / "log").read_text()
    try:
        yield Cluster(root, port)
    finally:
        _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def oltp_dsn(pg_cluster: Cluster) -> Iterator[str]:
    """A fresh database on the logical cluster; its slots are dropped and the database deleted afterwards."""
    import psycopg2

    name = f"oltp_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(pg_cluster.dsn())
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'create database "{name}"')
    try:
        yield pg_cluster.dsn(name)
    finally:
        with admin.cursor() as cur:
            cur.execute(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = %s", (name,)
            )
            cur.execute(f'drop database if exists "{name}" with (force)')
        admin.close()
