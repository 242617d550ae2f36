"""Benchmark: an hour (or more) of live operation, with a sink landing a file every few seconds into the open hour.

The same temporary project as ``latency.py`` (embedded defaults: SQLite catalog and Dagster storage, local files,
this repo's dagster.yaml, every sensor and schedule on, a local webhook), then ``dagster dev`` for ``--minutes``
while a sink thread lands one file every ``--every`` seconds into the arrival hour in progress, round robin over
orders (on-time deliveries), payments and pings, written to a temporary name and renamed as a Kafka Connect sink
does. Every ``--breach-every`` seconds the orders file instead holds an SLA breach (24 late deliveries of one
region's 5-minute window; the region rotates so that no window breaches twice). The hour rolls over as it does in
production: closed hours get their micro-batch snapshots consolidated by the platform, new hours start.

Per ``--slice`` minutes it prints, for the files landed in the slice:

  * bronze: seconds from the rename to the ``bronze/ingest_log`` materialization of a run created after it
    (median, p95);
  * alert: seconds from the rename of a breach file to its alert at the webhook (median, p95);
  * commit: per bronze table, the median ``commit_seconds`` of its materializations in the slice (the Iceberg commit
    of the batch), and the snapshots and files under ``metadata/`` it has at the slice's end;
  * the Dagster storage (DAGSTER_HOME) in MB, the daemon's RSS in MB, the 1-minute load average.

Then the last slice over the first for alert p95, bronze p95 and each table's commit seconds (target <= 1.2x), and
the metadata counts at the end of the first hour against the end (target: flat).

    .venv/bin/python benchmarks/soak.py                   # 60 minutes, a file every 5 s, 10-minute slices
    .venv/bin/python benchmarks/soak.py --minutes 12 --slice 4   # a quick look
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import HTTPServer
from pathlib import Path
from typing import Any

import dagster as dg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from latency import INGEST_LOG, Webhook, live_project, settled, start_dev, stop_dev, wait_for  # noqa: E402

from logistics_platform.lib.timekeys import hour_start  # noqa: E402
from tests.support.bronze import cdc, dump, iso, ping  # noqa: E402
from tests.support.live import window_deliveries  # noqa: E402

TOPICS = {
    "orders": "oltp.public.orders",
    "payments": "oltp.public.payments",
    "tracking_pings": "logistics.tracking_pings",
}
# Regions of the breach windows: one breach per region and 5-minute window (see --breach-every).
BREACH_REGIONS = ("soak-north", "soak-south", "soak-east", "soak-west")
FILLER_REGION = "soak-central"


@dataclass
class Landed:
    """One file the sink landed: its topic, rename time, and what the monitor found for it."""

    topic: str
    at: float
    ingest_log_before: int
    needle: str | None = None  # the alert text of a breach file
    bronze: float | None = None
    alert: float | None = None


@dataclass
class Sink:
    """Lands one file every ``every`` seconds into the open hour until stopped."""

    landing: Path
    every: float
    breach_every: float
    instance: dg.DagsterInstance
    landed: list[Landed] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    offsets: dict[str, int] = field(default_factory=dict)
    last_order: int = 8_000_000  # the first order of the last on-time orders file: what the payments pay

    def run(self) -> None:
        n, breaches, next_breach = 0, 0, time.time() + self.breach_every
        while not self.stop.is_set():
            started = time.time()
            table = list(TOPICS)[n % len(TOPICS)]
            now = datetime.now(UTC).replace(tzinfo=None)
            needle = None
            if table == "orders" and started >= next_breach:
                window = now.replace(second=0, microsecond=0) - timedelta(minutes=now.minute % 5 + 30)
                region = BREACH_REGIONS[breaches % len(BREACH_REGIONS)]
                lines = window_deliveries(window, region, 5_000_000 + 100 * breaches, 24, True, 10**10 + breaches)
                needle = f"{region} {window:%Y-%m-%d %H:%M}"
                breaches, next_breach = breaches + 1, next_breach + self.breach_every
            else:
                lines = self.filler(table, n, now)
            before = self.instance.fetch_materializations(INGEST_LOG, limit=1).records
            at = self.land(table, hour_start(now), lines)
            self.landed.append(Landed(table, at, before[0].storage_id if before else 0, needle))
            n += 1
            self.stop.wait(max(0.0, self.every - (time.time() - started)))

    def filler(self, table: str, n: int, now: datetime) -> list[bytes]:
        """A small ordinary file of ``table``: on-time deliveries, captured payments, or a courier's pings."""
        if table == "orders":
            window = now.replace(second=0, microsecond=0) - timedelta(minutes=now.minute % 5 + 45)
            self.last_order = 8_000_000 + 100 * n
            return window_deliveries(window, FILLER_REGION, self.last_order, 6, False, 2 * 10**10 + 100 * n)
        if table == "payments":
            rows = [
                {
                    "payment_id": 9_000_000 + 10 * n + i,
                    "order_id": self.last_order + i,
                    "amount": "50.00",
                    "method": "card",
                    "status": "captured",
                    "created_at": iso(now),
                    "updated_at": iso(now),
                }
                for i in range(5)
            ]
            return [dump(cdc("c", "payments", r, lsn=3 * 10**10 + 100 * n + i, ts=now)) for i, r in enumerate(rows)]
        return [dump(ping(f"soak-{n}-{i}", now - timedelta(seconds=i), courier_id=1 + n % 40)) for i in range(200)]

    def land(self, table: str, hour: datetime, lines: list[bytes]) -> float:
        """Write ``lines`` as the topic's next sink file of ``hour`` (temporary name, then rename)."""
        topic = TOPICS[table]
        offset = self.offsets.get(topic, 10**7)
        self.offsets[topic] = offset + len(lines)
        folder = self.landing / "topics" / topic / f"dt={hour:%Y-%m-%d}" / f"hr={hour:%H}"
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{topic}+0+{offset:010d}.json"
        tmp = folder / f".{final.name}.tmp"
        tmp.write_bytes(b"".join(line + b"\n" for line in lines))
        os.replace(tmp, final)
        return time.time()


class Monitor:
    """Resolves, for each landed file, when its rows reached bronze and (a breach) its alert the webhook."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.created: dict[str, float] = {}

    def run_created(self, run_id: str) -> float:
        if run_id not in self.created:
            record = self.instance.get_run_record_by_id(run_id)
            self.created[run_id] = record.create_timestamp.timestamp() if record else float("inf")
        return self.created[run_id]

    def resolve(self, landed: list[Landed]) -> bool:
        """Resolve what can be; True when every file of ``landed`` is resolved."""
        pending = [f for f in landed if f.bronze is None]
        if pending:
            records = self.instance.fetch_materializations(INGEST_LOG, limit=200).records
            for f in pending:
                found = [
                    r.timestamp
                    for r in records
                    if r.storage_id > f.ingest_log_before and self.run_created(r.run_id) > f.at
                ]
                if found:
                    f.bronze = min(found) - f.at
        for f in landed:
            if f.needle and f.alert is None:
                at = next((t for t, text in list(Webhook.received) if f.needle in text and t > f.at), None)
                if at is not None:
                    f.alert = at - f.at
        return all(f.bronze is not None and (f.needle is None or f.alert is not None) for f in landed)


def commit_seconds(instance: dg.DagsterInstance, table: str, start: float, end: float) -> list[float]:
    """``commit_seconds`` (the table's Iceberg commit, retries included) of ``bronze/<table>``'s materializations in a
    slice."""
    out = []
    for record in instance.fetch_materializations(dg.AssetKey(["bronze", table]), limit=1000).records:
        if start <= record.timestamp < end:
            meta = record.asset_materialization.metadata if record.asset_materialization else {}
            value = meta.get("commit_seconds")
            if value is not None:
                out.append(float(str(value.value)))
    return out


def metadata_counts(warehouse: Path, table: str) -> tuple[int, int]:
    """(snapshots kept, files under metadata/) of ``bronze.<table>``."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("logistics", uri=f"sqlite:///{warehouse / 'catalog.db'}", warehouse=f"file://{warehouse}")
    snapshots = len(catalog.load_table(f"bronze.{table}").metadata.snapshots)
    return snapshots, sum(1 for _ in (warehouse / "bronze" / table / "metadata").iterdir())


def tree_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def session_rss_mb(session: int) -> dict[str, float]:
    """RSS in MB of the daemon and of all processes of the ``dagster dev`` session."""
    daemon = total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if os.getsid(int(proc.name)) != session:
                continue
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            rss = next(int(x.split()[1]) for x in (proc / "status").read_text().splitlines() if x.startswith("VmRSS"))
        except (OSError, StopIteration, ProcessLookupError):
            continue
        total += rss / 1024
        if "dagster-daemon" in command or "daemon run" in command:
            daemon += rss / 1024
    return {"daemon": daemon, "session": total}


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fmt(value: float | None, width: int = 5) -> str:
    return f"{value:{width}.1f}" if value is not None else " " * (width - 1) + "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60.0, help="how long the sink lands files")
    p.add_argument("--every", type=float, default=5.0, help="seconds between two landed files")
    p.add_argument("--breach-every", type=float, default=75.0, help="seconds between two SLA breach files")
    p.add_argument("--slice", type=float, default=10.0, help="minutes per printed slice")
    p.add_argument("--history-hours", type=int, default=6, help="hours generated and ingested before the open one")
    p.add_argument("--keep", action="store_true", help="keep the temporary state")
    args = p.parse_args()

    server = HTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root, env, _ = live_project("soak-", args.history_hours, server.server_address[1])
    warehouse, home = root / "warehouse", Path(env["DAGSTER_HOME"])
    dev = start_dev(root, env)
    rows: list[dict[str, Any]] = []
    try:
        instance = dg.DagsterInstance.get()
        time.sleep(30)
        wait_for(lambda: settled(instance), 420, 2)
        sink = Sink(Path(env["LANDING_DIR"]), args.every, args.breach_every, instance)
        monitor = Monitor(instance)
        began = time.time()
        thread = threading.Thread(target=sink.run, daemon=True)
        thread.start()
        print(
            f"sink: a file every {args.every:.0f} s into the open hour ({', '.join(TOPICS)}), a breach every "
            f"{args.breach_every:.0f} s, for {args.minutes:.0f} min; slices of {args.slice:.0f} min",
            flush=True,
        )
        header = (
            "slice  files  bronze med   p95  alert med   p95  n  "
            + "  ".join(f"{t[:6]:>6s} commit snaps files" for t in TOPICS)
            + "  dagster MB  daemon MB  load"
        )
        print(header, flush=True)
        edges = [began + i * args.slice * 60 for i in range(int(args.minutes // args.slice) + 1)]
        loads: list[float] = []
        for i, (start, end) in enumerate(itertools.pairwise(edges)):
            while time.time() < end:
                time.sleep(5)
                loads.append(os.getloadavg()[0])
                monitor.resolve(sink.landed)
            if i == len(edges) - 2:
                sink.stop.set()
            # Give the slice's last files the time to reach bronze and the alert (at most two minutes).
            files = [f for f in sink.landed if start <= f.at < end]
            wait_for(lambda files=files: monitor.resolve(files), 120, 5)
            bronze = [f.bronze for f in files if f.bronze is not None]
            alert = [f.alert for f in files if f.alert is not None]
            row: dict[str, Any] = {
                "slice": i + 1,
                "files": len(files),
                "bronze_med": statistics.median(bronze) if bronze else None,
                "bronze_p95": pct(bronze, 0.95),
                "alert_med": statistics.median(alert) if alert else None,
                "alert_p95": pct(alert, 0.95),
                "alerts": f"{len(alert)}/{sum(1 for f in files if f.needle)}",
                "dagster_mb": tree_mb(home),
                "rss": session_rss_mb(dev.pid),
                "load": statistics.mean(loads) if loads else os.getloadavg()[0],
            }
            loads.clear()
            for table in TOPICS:
                commits = commit_seconds(instance, table, start, end)
                row[f"{table}_commit"] = statistics.median(commits) if commits else None
                row[f"{table}_meta"] = metadata_counts(warehouse, table)
            rows.append(row)
            print(
                f"{row['slice']:5d}  {row['files']:5d}  {fmt(row['bronze_med'], 10)} {fmt(row['bronze_p95'])}  "
                f"{fmt(row['alert_med'], 9)} {fmt(row['alert_p95'])} {row['alerts']:>4s}  "
                + "  ".join(
                    f"{fmt(row[f'{t}_commit'], 13)} {row[f'{t}_meta'][0]:5d} {row[f'{t}_meta'][1]:5d}" for t in TOPICS
                )
                + f"  {row['dagster_mb']:10.1f}  {row['rss']['daemon']:9.0f}  {row['load']:4.1f}",
                flush=True,
            )
        thread.join(30)
    finally:
        stop_dev(dev)
        server.shutdown()

    if len(rows) >= 2:
        first, last = rows[0], rows[-1]
        print(f"\nlast slice / first slice (target <= 1.2x), load {first['load']:.1f} -> {last['load']:.1f}:")
        for key in ("alert_p95", "bronze_p95", *(f"{t}_commit" for t in TOPICS)):
            if first[key] and last[key] is not None:
                print(f"  {key:24s} {first[key]:6.2f} -> {last[key]:6.2f}  {last[key] / first[key]:.2f}x")
        per_hour = max(1, round(60 / args.slice))
        if len(rows) > per_hour:
            hour = rows[per_hour - 1]
            print("metadata after the first hour -> at the end (snapshots, files under metadata/):")
            for t in TOPICS:
                print(f"  {t:24s} {hour[f'{t}_meta']} -> {last[f'{t}_meta']}")
        print(
            f"Dagster storage {first['dagster_mb']:.1f} MB -> {last['dagster_mb']:.1f} MB; "
            f"daemon RSS {first['rss']['daemon']:.0f} MB -> {last['rss']['daemon']:.0f} MB"
        )
    if args.keep:
        print(f"state kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
