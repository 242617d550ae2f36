"""Benchmark: logical-replication capture throughput against ``COPY ... TO STDOUT`` of the same rows.

Starts a throwaway ``wal_level=logical`` cluster, creates the capture slot on an empty ``orders`` table, then
inserts N orders and updates each once (2N changes, in transactions of ``--tx-rows`` rows), and times in one run:

* ``capture``: decoding the 2N changes from the slot and landing them durably (Debezium JSON, fsync, manifest);
* ``copy``: ``COPY (select ... from orders) TO STDOUT`` of the N rows, twice (the changed rows' data, once per
  change), from the same server.

Reports rows/s of each and capture/copy as a ratio. Asserts that every change landed.

    .venv/bin/python benchmarks/capture.py [--rows 50000] [--tx-rows 500]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

import psycopg2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from logistics_platform.lib.capture.replication import capture_logical  # noqa: E402
from logistics_platform.lib.capture.schema import TABLES, create_schema  # noqa: E402
from tests.capture.cluster import logical_cluster  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--tx-rows", type=int, default=500)
    args = ap.parse_args()
    with logical_cluster() as cluster, tempfile.TemporaryDirectory() as tmp:
        admin = psycopg2.connect(cluster.dsn())
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute("create database bench")
        admin.close()
        dsn = cluster.dsn("bench")
        conn = psycopg2.connect(dsn)
        create_schema(conn)
        with conn.cursor() as cur:
            cur.execute("insert into tenants values ('t001', 'Tenant', 'gold', 'north', now())")
        conn.commit()
        landing = Path(tmp) / "landing"
        capture_logical(dsn, landing, "bench", "bench")  # slot + (tiny) snapshot
        with conn.cursor() as cur:
            for lo in range(1, args.rows + 1, args.tx_rows):
                hi = min(lo + args.tx_rows - 1, args.rows)
                cur.execute(
                    "insert into orders select i, 't001', null, 'north', 'created', 100.00 + i %% 1000, 5.50,"
                    " now(), now() + interval '45 minutes', null, now() from generate_series(%s, %s) i",
                    (lo, hi),
                )
                conn.commit()
            for lo in range(1, args.rows + 1, args.tx_rows):
                hi = min(lo + args.tx_rows - 1, args.rows)
                cur.execute(
                    "update orders set status = 'assigned', courier_id = order_id %% 50, updated_at = now()"
                    " where order_id between %s and %s",
                    (lo, hi),
                )
                conn.commit()
        changes = 2 * args.rows

        t0 = time.perf_counter()
        result = capture_logical(dsn, landing, "bench", "bench")
        capture_s = time.perf_counter() - t0
        assert result.changes == changes, (result.changes, changes)

        cols = ", ".join(TABLES["orders"])
        t0 = time.perf_counter()
        copied = 0
        with conn.cursor() as cur:
            for _ in range(2):
                buf = io.StringIO()
                cur.copy_expert(f"copy (select {cols} from orders) to stdout", buf)
                copied += buf.getvalue().count("\n")
        copy_s = time.perf_counter() - t0
        conn.close()
        assert copied == changes
        cap_rate, copy_rate = changes / capture_s, copied / copy_s
        print(f"changes: {changes:,} ({args.rows:,} orders inserted, then updated; {args.tx_rows} rows/transaction)")
        print(f"capture: {capture_s:.2f} s, {cap_rate:,.0f} rows/s ({len(result.files)} files)")
        print(f"copy:    {copy_s:.2f} s, {copy_rate:,.0f} rows/s")
        print(f"ratio capture/copy: {cap_rate / copy_rate:.3f} (copy is {copy_rate / cap_rate:.1f}x faster)")


if __name__ == "__main__":
    main()
