"""A throwaway PostgreSQL 15 cluster with ``wal_level=logical``: initdb + pg_ctl as the postgres user, on a free
port, unix socket and data in a temp dir; stopped and deleted on exit. Used by the capture tests and benchmark, and
(with a password) by the misconfiguration test that needs a server which checks passwords."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql/15/bin")


@dataclass(frozen=True)
class Cluster:
    socket_dir: Path
    port: int

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"host={self.socket_dir} port={self.port} dbname={dbname} user={user}"


class ClusterError(RuntimeError):
    """The cluster could not be started."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = args if os.geteuid() != 0 else ["su", "postgres", "-c", " ".join(args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@contextmanager
def logical_cluster(password: str | None = None) -> Iterator[Cluster]:
    """A running cluster for the duration of the block.

    With ``password``, the postgres role has it and every login must give it (scram-sha-256), over the unix socket
    and over TCP on 127.0.0.1 (the shared server on 5432 trusts every local login, so it cannot refuse a password).
    """
    if not (PG_BIN / "initdb").exists():
        raise ClusterError(f"PostgreSQL 15 binaries are not in {PG_BIN}; install postgresql-15")
    root = Path(tempfile.mkdtemp(prefix="capture_pg_"))
    os.chmod(root, 0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data = root / "data"
    try:
        auth = ["-A", "trust"]
        if password is not None:
            pwfile = root / "pwfile"
            pwfile.write_text(password + "\n")
            if os.geteuid() == 0:
                shutil.chown(pwfile, "postgres", "postgres")
            auth = ["-A", "scram-sha-256", f"--pwfile={pwfile}"]
        init = _as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", *auth, "--no-sync"])
        if init.returncode != 0:
            raise ClusterError(f"initdb failed: {init.stderr.strip()}")
        port = _free_port()
        opts = (
            f"-c wal_level=logical -c port={port} -c listen_addresses='{'' if password is None else '127.0.0.1'}' "
            f"-c unix_socket_directories={root} "
            "-c max_replication_slots=20 -c max_wal_senders=20 -c fsync=off -c full_page_writes=off"
        )
        start = _as_postgres(
            [str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-o", f'"{opts}"', "start"]
        )
        if start.returncode != 0:
            log = (root / "log").read_text() if (root / "log").exists() else ""
            raise ClusterError(f"pg_ctl start failed: {start.stderr.strip()} {log.strip()}")
        try:
            yield Cluster(root, port)
        finally:
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
