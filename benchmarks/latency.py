"""Benchmark: seconds from a file a live sink lands in the hour in progress to its rows in bronze, to
marts.fct_region_sla and to the SLA alert at a webhook, and from a ping file with an off-route episode to the off-route
alert, through `dagster dev` (webserver + daemon, all automation on).

A temporary project state on the embedded defaults (SQLite catalog and Dagster storage, local files, this repo's
dagster.yaml): `logistics-platform generate` of the hours up to the open one and `logistics-platform run` (the steady
state of ingested history), then `dagster dev -w workspace.yaml` with AUTOMATION_DEFAULT_STATUS=running and
ALERT_WEBHOOK_URL a local http.server. It lands BATCHES order files into the OPEN hour (real clock), BATCH_GAP
seconds apart, written to a temporary name and renamed as a Kafka Connect sink does; batch BREACH_BATCH holds late
deliveries of one region's 5-minute window (24 deliveries, all late: above SLA_MIN_DELIVERIES and
SLA_LATE_SHARE_MAX). Per batch it prints the seconds from the rename to

  * bronze: the ``bronze/ingest_log`` materialization of the open hour (written after the Iceberg commit),
  * sla: the ``marts/fct_region_sla`` materialization (the DuckDB model built by dbt; the Iceberg publish is the
    full batch's), both read from the Dagster instance's event log,
  * alert: the breach alert's arrival at the webhook (breach batch only),
  * off_route: the off-route alert's arrival at the webhook, from the rename of the batch's ping file: before the
    batches one order per batch is landed (in transit with its own courier, pickup -> drop-off known), and each batch
    lands, just before its order file, that courier's pings of the last OFF_ROUTE_PINGS minutes, all 3 km off the
    corridor (an episode of OFF_ROUTE_PINGS - 1 minutes, above OFF_ROUTE_MINUTES),

the hops of the live path from the instance's run records, median and max, and the 1-minute load average.

    .venv/bin/python benchmarks/latency.py                 # 4 batches a minute apart (~7 min)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import dagster as dg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logistics_platform.lib.timekeys import hour_start  # noqa: E402
from tests.support.bronze import cdc, dump, iso, order, ping  # noqa: E402
from tests.support.live import window_deliveries  # noqa: E402

ORDERS = "oltp.public.orders"
PINGS = "logistics.tracking_pings"
# The off-route batches: courier and order ids far past the generator's, one a batch; pings a minute apart.
OFF_ROUTE_COURIER, OFF_ROUTE_ORDER, OFF_ROUTE_PINGS = 90_000, 800_000, 9
BIN = ROOT / ".venv" / "bin"
INGEST_LOG = dg.AssetKey(["bronze", "ingest_log"])
SLA_MART = dg.AssetKey(["marts", "fct_region_sla"])


class Webhook(BaseHTTPRequestHandler):
    """Records (arrival time, text) of every POST."""

    received: list[tuple[float, str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Webhook.received.append((time.time(), json.loads(body).get("text", "")))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def newest(instance: dg.DagsterInstance, key: dg.AssetKey) -> tuple[int, float]:
    """(storage id, timestamp) of the newest materialization of ``key`` ((0, 0) before any)."""
    records = instance.fetch_materializations(key, limit=1).records
    return (records[0].storage_id, records[0].timestamp) if records else (0, 0.0)


def live_project(prefix: str, history_hours: int, webhook_port: int) -> tuple[Path, dict[str, str], datetime]:
    """A temporary project on the embedded defaults with ``history_hours`` generated and run up to the open hour.

    Returns its root, the environment of its processes (this process's DAGSTER_HOME too) and the open hour.
    """
    root = Path(tempfile.mkdtemp(prefix=prefix))
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    open_hour = hour_start(datetime.now(UTC))
    start = open_hour - timedelta(hours=history_hours)
    env = {
        **os.environ,
        "DO_NOT_TRACK": "1",
        "PYTHONPATH": str(ROOT),
        "DAGSTER_HOME": str(home),
        "LANDING_DIR": str(root / "landing"),
        "ICEBERG_CATALOG_URI": f"sqlite:///{root / 'warehouse' / 'catalog.db'}",
        "ICEBERG_WAREHOUSE": f"file://{root / 'warehouse'}",
        "DUCKDB_PATH": str(root / "warehouse" / "analytics.duckdb"),
        "ALERTS_LOG": str(root / "alerts.jsonl"),
        "ALERT_WEBHOOK_URL": f"http://127.0.0.1:{webhook_port}/hook",
        "PARTITIONS_START": f"{start - timedelta(days=1):%Y-%m-%d}-00:00",
        "AUTOMATION_DEFAULT_STATUS": "running",
    }
    os.environ.update({k: env[k] for k in ("DAGSTER_HOME", "DO_NOT_TRACK")})
    cli = str(BIN / "logistics-platform")
    t = time.time()
    subprocess.run(
        [cli, "generate", "--start", f"{start:%Y-%m-%dT%H}", "--hours", str(history_hours + 1), "--quiet"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run([cli, "run"], env=env, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    print(
        f"history: {history_hours + 1} hours up to the open one {open_hour:%Y-%m-%d %H}:00, generated and run "
        f"in {time.time() - t:.0f} s",
        flush=True,
    )
    return root, env, open_hour


def start_dev(root: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``dagster dev`` (webserver and daemon) on the project of ``env``, in its own session, logging under ``root``."""
    command = [str(BIN / "dagster"), "dev", "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1"]
    with (root / "dagster_dev.log").open("wb") as log:
        return subprocess.Popen(
            [*command, "-p", str(free_port())],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_dev(dev: subprocess.Popen[bytes]) -> None:
    """Stop ``dagster dev`` and every process of its session."""
    os.killpg(dev.pid, signal.SIGTERM)
    try:
        dev.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(dev.pid, signal.SIGKILL)


def built_after(instance: dg.DagsterInstance, key: dg.AssetKey, after_id: int, after: float) -> float | None:
    """Timestamp of the first materialization of ``key`` past ``after_id`` by a run created after the epoch seconds
    ``after`` (a run created before the landing, or before the batch's ingest, read the data without the batch)."""
    for record in reversed(instance.fetch_materializations(key, limit=10).records):
        if record.storage_id <= after_id:
            continue
        run = instance.get_run_record_by_id(record.run_id)
        if run is not None and run.create_timestamp.timestamp() > after:
            return record.timestamp
    return None


def land(landing: Path, hour: datetime, offset: int, lines: list[bytes], topic: str = ORDERS) -> float:
    """Write one sink file into ``hour`` (temporary name, then rename); the epoch seconds of the rename."""
    folder = landing / "topics" / topic / f"dt={hour:%Y-%m-%d}" / f"hr={hour:%H}"
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{topic}+9+{offset:010d}.json"
    tmp = folder / f".{final.name}.tmp"
    tmp.write_bytes(b"".join(line + b"\n" for line in lines))
    os.replace(tmp, final)
    return time.time()


def off_route_orders(batches: int, now: datetime) -> list[bytes]:
    """One order per batch, created 20 minutes before ``now``, assigned to its own courier and in transit since: a
    corridor of about 2 km north from its pickup."""
    lines = []
    for b in range(batches):
        created, lat, lon = now - timedelta(minutes=20), -23.6 + 0.05 * b, -46.7
        corridor = {"pickup_lat": lat, "pickup_lon": lon, "dropoff_lat": lat + 0.02, "dropoff_lon": lon}
        row = order(OFF_ROUTE_ORDER + b, created, courier_id=OFF_ROUTE_COURIER + b, status="in_transit", **corridor)
        row["promised_at"] = iso(now + timedelta(hours=2))
        lines.append(dump(cdc("c", "orders", row, lsn=10**10 + b, ts=created)))
    return lines


def off_route_pings(batch: int, now: datetime) -> list[bytes]:
    """The batch's courier's pings of the last OFF_ROUTE_PINGS minutes before ``now``, 0.03 degrees (3 km) east of
    its corridor."""
    lat, lon, courier = -23.6 + 0.05 * batch + 0.01, -46.7 + 0.03, OFF_ROUTE_COURIER + batch
    at = [now - timedelta(minutes=OFF_ROUTE_PINGS - k) for k in range(OFF_ROUTE_PINGS)]
    return [dump(ping(f"bench-{batch}-{k}", t, courier_id=courier, lat=lat, lon=lon)) for k, t in enumerate(at)]


def wait_for(check: Any, timeout: float, step: float = 0.5) -> Any:
    end = time.time() + timeout
    while time.time() < end:
        found = check()
        if found:
            return found
        time.sleep(step)
    return None


def quiet(instance: dg.DagsterInstance) -> bool:
    active = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    return not instance.get_runs(dg.RunsFilter(statuses=[*active, dg.DagsterRunStatus.NOT_STARTED]), limit=1)


def settled(instance: dg.DagsterInstance) -> bool:
    """No run queued or in flight, three times 5 s apart."""
    for _ in range(3):
        if not quiet(instance):
            return False
        time.sleep(5)
    return True


def hops(instance: dg.DagsterInstance, landed: float) -> dict[str, float]:
    """The live path's hops after ``landed``: the first ingest run and the first live SLA run created after it."""
    out: dict[str, float] = {}
    records = instance.get_run_records(dg.RunsFilter(created_after=datetime.fromtimestamp(landed, UTC)))
    for kind, trigger in (("ingest", "landing_sensor"), ("sla", "sla_after_ingest")):
        runs = sorted(
            (r for r in records if r.dagster_run.tags.get("logistics/trigger") == trigger),
            key=lambda r: r.create_timestamp,
        )
        if runs:
            r = runs[0]
            out[f"{kind}_created"] = r.create_timestamp.timestamp() - landed
            if r.start_time:
                out[f"{kind}_started"] = r.start_time - landed
            if r.end_time:
                out[f"{kind}_ended"] = r.end_time - landed
    return out


def alert_at(needle: str, after: float, timeout: float) -> float | None:
    """When the webhook received an alert naming ``needle`` after ``after`` (None: not within ``timeout`` seconds)."""
    return wait_for(lambda: next((at for at, text in Webhook.received if needle in text and at > after), None), timeout)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--gap", type=float, default=60.0, help="seconds between batches")
    p.add_argument("--breach-batch", type=int, default=2, help="0-based index of the batch with the SLA breach")
    p.add_argument("--history-hours", type=int, default=6, help="hours generated and ingested before the open one")
    p.add_argument("--timeout", type=float, default=150.0, help="seconds a batch may take to reach the alert")
    p.add_argument("--keep", action="store_true", help="keep the temporary state")
    args = p.parse_args()

    server = HTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root, env, open_hour = live_project("latency-", args.history_hours, server.server_address[1])
    landing = Path(env["LANDING_DIR"])
    # The orders the off-route batches' couriers carry: ingested (and built) in the steady state, before the batches.
    land(
        landing,
        open_hour.replace(tzinfo=None),
        10**6 - 1,
        off_route_orders(args.batches, datetime.now(UTC).replace(tzinfo=None)),
    )
    dev = start_dev(root, env)
    loads: list[float] = []
    rows: list[dict[str, float]] = []
    try:
        instance = dg.DagsterInstance.get()
        # Steady state: the sensors have had their first ticks and what they launched has finished.
        time.sleep(30)
        wait_for(lambda: settled(instance), 420, 2)
        sampler_stop = threading.Event()

        def sample() -> None:
            while not sampler_stop.wait(2):
                loads.append(os.getloadavg()[0])

        threading.Thread(target=sample, daemon=True).start()
        for b in range(args.batches):
            batch_start = time.time()
            now = datetime.now(UTC)
            if hour_start(now) != open_hour:
                print("the hour changed during the run: stopping (re-run it at least 8 minutes before the hour)")
                break
            breach = b == args.breach_batch
            window = now.replace(tzinfo=None, second=0, microsecond=0) - timedelta(minutes=now.minute % 5 + 30)
            lines = window_deliveries(window, "north" if breach else "south", 900_000 + 100 * b, 24, breach, 10**9 + b)
            bronze_before, sla_before = newest(instance, INGEST_LOG)[0], newest(instance, SLA_MART)[0]
            hour = open_hour.replace(tzinfo=None)
            pings_landed = land(landing, hour, 10**6 + 100 * b, off_route_pings(b, now.replace(tzinfo=None)), PINGS)
            landed = land(landing, hour, 10**6 + 100 * b, lines)
            row: dict[str, float] = {}
            got = wait_for(lambda b=bronze_before, a=landed: built_after(instance, INGEST_LOG, b, a), args.timeout)
            if got:
                row["bronze"] = got - landed
            if "bronze" in row:
                after = landed + row["bronze"]
                got = wait_for(lambda b=sla_before, a=after: built_after(instance, SLA_MART, b, a), args.timeout)
                if got:
                    row["sla"] = got - landed
            if breach:
                needle = f"north {window:%Y-%m-%d %H:%M}"
                got = alert_at(needle, landed, args.timeout)
                if got:
                    row["alert"] = got - landed
            needle = f"courier {OFF_ROUTE_COURIER + b} order {OFF_ROUTE_ORDER + b} "
            got = alert_at(needle, pings_landed, args.timeout)
            if got:
                row["off_route"] = got - pings_landed
            # The runs' end times are written just after their last event.
            time.sleep(5)
            row.update(hops(instance, landed))
            rows.append(row)
            shown = "  ".join(f"{k}={v:.1f}" for k, v in row.items())
            print(f"batch {b}{' (breach)' if breach else ''}: {shown}", flush=True)
            time.sleep(max(0.0, args.gap - (time.time() - batch_start)))
        sampler_stop.set()
    finally:
        stop_dev(dev)
        server.shutdown()

    print(f"\n{len(rows)} batches, {args.gap:.0f} s apart, landing -> (seconds)")
    for key in ("bronze", "sla", "alert", "off_route"):
        values = [r[key] for r in rows if key in r]
        expected = len(rows) if key != "alert" else int(len(rows) > args.breach_batch)
        missing = expected - len(values)
        if values:
            print(
                f"  {key:9s} median {statistics.median(values):5.1f}  max {max(values):5.1f}  (n={len(values)}"
                f"{f', {missing} not reached in {args.timeout:.0f} s' if missing else ''})"
            )
        else:
            print(f"  {key:9s} not reached")
    for key in ("ingest_created", "ingest_started", "ingest_ended", "sla_created", "sla_started", "sla_ended"):
        values = [r[key] for r in rows if key in r]
        if values:
            print(f"  hop {key:15s} median {statistics.median(values):5.1f}")
    if loads:
        print(
            f"load (1-min avg, {os.cpu_count()} cores) during the batches: mean {statistics.mean(loads):.2f}, "
            f"max {max(loads):.2f}"
        )
    if args.keep:
        print(f"state kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
