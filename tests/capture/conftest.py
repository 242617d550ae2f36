"""Capture tests run against a throwaway ``wal_level=logical`` cluster (tests/capture/cluster.py): one per test
session, a fresh database per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from logistics_platform.lib.capture.slot import released_slot_info
from tests.capture.cluster import Cluster, ClusterError, logical_cluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A PostgreSQL 15 cluster with wal_level=logical on a free port, unix socket in its temp dir."""
    try:
        with logical_cluster() as cluster:
            yield cluster
    except ClusterError as exc:
        pytest.fail(str(exc))


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
            # A capture that just returned may hold its slot a moment longer (its walsender is still exiting).
            cur.execute("select slot_name from pg_replication_slots where database = %s", (name,))
            for (slot,) in cur.fetchall():
                released_slot_info(admin, slot)
            cur.execute(
                "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = %s", (name,)
            )
            cur.execute(f'drop database if exists "{name}" with (force)')
        admin.close()
