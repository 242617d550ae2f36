"""The OLTP world the real-connector tests capture: a throwaway cluster, the contract's tables, and a workload.

Shared by the test module and the fixture maker (``python -m tests.debezium.make_fixtures``).
"""

from __future__ import annotations

import random
import string
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2

from logistics_platform.lib.capture.simulate import simulate
from tests.capture.cluster import logical_cluster
from tests.support.debezium import Database

PASSWORD = "dbz-test"  # the cluster then listens on 127.0.0.1, which the JDBC driver needs
CHANGES = 400  # row changes of the simulated stream
TOAST_TENANT = "t900"  # its name is stored out of line (TOAST) and left unchanged by its tier update
DELETED_TENANT = "t901"
TOAST_COURIER = 900_001  # the same for a courier's name, left unchanged by an update of active
# Amounts at the edges of numeric(12,2) and of the byte length of Kafka Connect's Decimal.
EDGE_ORDERS = (("0.01", "0.00"), ("1.28", "0.99"), ("99999999.99", "12.50"), ("9999999999.99", "0.01"))
EDGE_ORDER_ID = 900_001  # the first of them; the simulated orders count up from 1


@contextmanager
def oltp_database() -> Iterator[Database]:
    """A running cluster with an ``oltp`` database holding the contract's tables, tenants and couriers."""
    with logical_cluster(password=PASSWORD) as cluster:
        admin = psycopg2.connect(
            host="127.0.0.1", port=cluster.port, dbname="postgres", user="postgres", password=PASSWORD
        )
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute("create database oltp")
        admin.close()
        db = Database("127.0.0.1", cluster.port, "oltp", "postgres", PASSWORD)
        conn = db.connect()
        try:
            # Tenants and couriers exist before the connector starts: they arrive as its snapshot (op r).
            simulate(conn, 0, seed=1)
        finally:
            conn.close()
        yield db


def workload(conn: Any) -> None:
    """Inserts, updates and deletes of all four tables, edge amounts, unchanged TOASTed columns, and the orders'
    coordinates added half way by ALTER TABLE (the connector sees the new columns in the middle of its stream)."""
    simulate(conn, CHANGES, seed=2, coordinates_after=CHANGES // 2)
    rng = random.Random(3)
    # Random letters compress too little to stay inline: the name is TOASTed, and a tier update leaves it as is.
    toast_name = "".join(rng.choice(string.ascii_letters) for _ in range(3_000))
    with conn.cursor() as cur:
        cur.execute("insert into tenants values (%s, 'Gone', 'silver', 'east', clock_timestamp())", (DELETED_TENANT,))
        conn.commit()
        time.sleep(0.005)  # event time has millisecond precision: two versions in one millisecond would tie
        cur.execute("delete from tenants where tenant_id = %s", (DELETED_TENANT,))
        conn.commit()
        cur.execute(
            "insert into tenants values (%s, %s, 'bronze', 'north', clock_timestamp())", (TOAST_TENANT, toast_name)
        )
        conn.commit()
        time.sleep(0.005)
        cur.execute(
            "update tenants set tier = 'gold', updated_at = clock_timestamp() where tenant_id = %s", (TOAST_TENANT,)
        )
        conn.commit()
        courier_name = "".join(rng.choice(string.ascii_letters) for _ in range(3_000))
        cur.execute(
            "insert into couriers values (%s, %s, 'north', 'bike', true, clock_timestamp())",
            (TOAST_COURIER, courier_name),
        )
        conn.commit()
        time.sleep(0.005)
        cur.execute(
            "update couriers set active = false, updated_at = clock_timestamp() where courier_id = %s", (TOAST_COURIER,)
        )
        conn.commit()
        # One transaction of several rows; a null courier_id; a promised_at on a whole second (no fraction digits).
        for i, (total, fee) in enumerate(EDGE_ORDERS):
            cur.execute(
                "insert into orders values (%s, 't001', null, 'north', 'created', %s, %s, clock_timestamp(),"
                " date_trunc('second', clock_timestamp()) + interval '45 minutes', null, clock_timestamp())",
                (EDGE_ORDER_ID + i, total, fee),
            )
        conn.commit()


def table_rows(conn: Any, table: str, columns: tuple[str, ...], key: str) -> list[tuple[Any, ...]]:
    """The table's rows, ordered by ``key``, timestamps as naive UTC."""
    with conn.cursor() as cur:
        cur.execute("set timezone = 'UTC'")
        cur.execute(f"select {', '.join(columns)} from {table} order by {key}")
        rows = [
            tuple(v.replace(tzinfo=None) if hasattr(v, "tzinfo") and v.tzinfo else v for v in r) for r in cur.fetchall()
        ]
    conn.commit()
    return rows
