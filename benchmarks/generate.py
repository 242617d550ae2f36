"""Generator throughput: lines/s and MB/s, against baselines measured in the same run.

Generates about ``--lines`` landing lines (default 2M; ``--lines 10000000`` for the 10M case) into a temp
directory with the default topic mix (orders, payments, pings in the CLI's proportions), then measures:

- I/O baseline: writing the same files (same sizes, same count, content already in memory) into a fresh
  directory. ``generate / io`` is how far generation is from the disk's limit.
- Naive baseline: building the same number of ping lines with ``json.dumps`` per line (a sample, scaled),
  i.e. what a straightforward generator would spend on text alone.
- Parse baseline: the platform's own line parser (``lib.envelope.LineParser``, the bronze ingest's per-line
  path) on a sample of the generated lines of every topic, scaled to all lines.
- Ingest: the real bronze ingest (``lib.ingest.ingest_hour``: vectorised clean path, quarantine, Iceberg
  commits) of a sample of the generated arrival hours into a temp warehouse, scaled to all lines by the lines
  it ingested. Generation must stay well under the time it takes to ingest what it wrote (target: under half).

Usage: .venv/bin/python benchmarks/generate.py [--lines N] [--mode clean|default] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from logistics_platform.generator import GeneratorConfig, generate

CDC_LINES_PER_ORDER = 7.3  # orders + payments + couriers/tenants changes per order (measured on defaults)
DEFAULT = GeneratorConfig(start=datetime(2026, 11, 1))


def volumes(lines: int, hours: int) -> dict[str, int]:
    """orders/pings per day giving about ``lines`` lines over ``hours`` with the default orders:pings mix."""
    per_day_default = DEFAULT.orders_per_day * CDC_LINES_PER_ORDER + DEFAULT.pings_per_day
    scale = lines / (per_day_default * hours / 24)
    orders = max(100, int(DEFAULT.orders_per_day * scale))
    return {
        "orders_per_day": orders,
        "pings_per_day": int(DEFAULT.pings_per_day * scale),
        "couriers": max(DEFAULT.couriers, orders // 16),
    }


def io_baseline(src: Path, dst: Path) -> tuple[float, int]:
    """Seconds to write the generated files again from memory (the I/O limit), and the bytes written.

    Each file is read first (not timed), then written (timed), so memory stays at one file.
    """
    spent = 0.0
    total = 0
    made: set[Path] = set()
    for path in sorted(p for p in (src / "topics").rglob("*") if p.is_file()):  # JSON Lines and Avro files
        blob = path.read_bytes()
        target = dst / path.relative_to(src)
        t0 = time.perf_counter()
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        with open(target, "wb") as fh:
            fh.write(blob)
        spent += time.perf_counter() - t0
        total += len(blob)
    return spent, total


def naive_ping_seconds(lines: int, sample: int = 200_000) -> tuple[float, float]:
    """(wall, CPU) seconds a json.dumps-per-line generator would need for ``lines`` ping lines (scaled)."""
    rng = random.Random(1)
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(sample):
        json.dumps(
            {
                "ping_id": f"{rng.getrandbits(128):032x}",
                "courier_id": 1000 + i % 500,
                "order_id": 100000 + i,
                "lat": round(-23.5 + rng.random() / 10, 6),
                "lon": round(-46.6 + rng.random() / 10, 6),
                "speed_kmh": round(rng.random() * 40, 1),
                "recorded_at": datetime(2026, 11, 1, 12, i % 60, i % 60, i % 1_000_000).isoformat() + "Z",
            },
            separators=(",", ":"),
        )
    scale = lines / sample
    return (time.perf_counter() - t0) * scale, (time.process_time() - c0) * scale


def parse_seconds(root: Path, summary: dict, sample: int = 200_000) -> tuple[float, float]:
    """(wall, CPU) seconds the bronze line parser would need for every generated line (samples, scaled)."""
    from logistics_platform.lib.bronze.envelope import LineParser
    from logistics_platform.lib.bronze.schema import TOPIC_BY_NAME

    total = total_cpu = 0.0
    for topic, t in summary["topics"].items():
        want = max(1, sample * t["lines"] // summary["totals"]["lines"])
        raws: list[bytes] = []
        for path in sorted((root / "topics" / topic).rglob("*.json*")):  # JSON lines: the line parser's input
            data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
            raws.extend(data.split(b"\n")[:-1])
            if len(raws) >= want:
                break
        raws = raws[:want]
        parser = LineParser(TOPIC_BY_NAME[topic], datetime(2026, 11, 1, 12), 7200)
        t0, c0 = time.perf_counter(), time.process_time()
        for i, raw in enumerate(raws):
            parser.parse(raw, 0, i, "sample")
        scale = t["lines"] / max(1, len(raws))
        total += (time.perf_counter() - t0) * scale
        total_cpu += (time.process_time() - c0) * scale
    return total, total_cpu


def ingest_seconds(landing: Path, work: Path, every: int) -> tuple[float, float, int]:
    """(wall, CPU) seconds and lines of the real bronze ingest of every ``every``-th arrival hour."""
    from logistics_platform.lib.bronze.ingest import ingest_hour
    from logistics_platform.lib.bronze.landing import list_arrival_hours
    from logistics_platform.lib.bronze.tables import ensure_bronze_tables
    from logistics_platform.lib.connections import load_catalog
    from logistics_platform.settings import local_settings

    settings = local_settings(work, landing_dir=landing)
    ensure_bronze_tables(load_catalog(settings))  # one-off table creation, not part of an hour's ingest
    hours = list_arrival_hours(landing)[::every]
    lines = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for i, hour in enumerate(hours, 1):
        lines += ingest_hour(settings, hour, progress=lambda _: None).lines
        print(f"\r  ingested {i}/{len(hours)} sampled hours, {lines:,} lines", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return time.perf_counter() - t0, time.process_time() - c0, lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=2_000_000, help="about this many lines (default 2,000,000)")
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--mode", choices=("clean", "default"), default="clean", help="clean data or every anomaly")
    ap.add_argument("--keep", type=Path, help="generate here and keep the files")
    ap.add_argument("--ingest-every", type=int, default=4, help="ingest every N-th arrival hour (default 4)")
    args = ap.parse_args()

    vol = volumes(args.lines, args.hours)
    start = datetime(2026, 11, 1)
    cfg = (
        GeneratorConfig.clean(start, hours=args.hours, seed=1, **vol)
        if args.mode == "clean"
        else GeneratorConfig(start=start, hours=args.hours, seed=1, **vol)
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench_generate_"))
    out = args.keep or tmp / "landing"
    try:
        print(f"generating ~{args.lines:,} lines ({args.mode}, {args.hours} h, {vol}) into {out}", flush=True)
        c0, t0 = time.process_time(), time.perf_counter()
        summary = generate(out, cfg, progress=sys.stderr.isatty())
        gen_s, gen_cpu = time.perf_counter() - t0, time.process_time() - c0
        tot = summary["totals"]
        lines, mb = tot["lines"], tot["bytes"] / 1e6
        io_s, io_bytes = io_baseline(out, tmp / "io_copy")
        assert io_bytes == tot["bytes"]
        naive_s, naive_cpu = naive_ping_seconds(lines)
        parse_s, parse_cpu = parse_seconds(out, summary)
        print("ingesting a sample of the arrival hours (lib.ingest.ingest_hour) ...", flush=True)
        ing_s, ing_cpu, ing_lines = ingest_seconds(out, tmp / "ingest", args.ingest_every)
        ing_s, ing_cpu = ing_s * lines / ing_lines, ing_cpu * lines / ing_lines  # scaled to every line
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"lines            {lines:,} in {tot['files']:,} files, {mb:,.1f} MB")
        for topic, t in summary["topics"].items():
            print(f"  {topic:<26} {t['lines']:>11,} lines")
        print(f"generate         {gen_s:8.2f} s wall  {lines / gen_s:>12,.0f} lines/s  {mb / gen_s:8.1f} MB/s")
        print(f"                 {gen_cpu:8.2f} s cpu   {lines / gen_cpu:>12,.0f} lines/s (CPU time: less noisy)")
        print(f"io baseline      {io_s:8.2f} s       {lines / io_s:>12,.0f} lines/s  {mb / io_s:8.1f} MB/s")
        print(f"naive json.dumps {naive_s:8.2f} s wall {naive_cpu:8.2f} s cpu (text only, scaled from a sample)")
        print(
            f"ingest parse     {parse_s:8.2f} s wall {parse_cpu:8.2f} s cpu  {lines / parse_cpu:>10,.0f} lines/s cpu"
            " (lib.envelope.LineParser, sampled)"
        )
        print(
            f"ingest (real)    {ing_s:8.2f} s wall {ing_cpu:8.2f} s cpu  {lines / ing_cpu:>10,.0f} lines/s cpu"
            f" {lines / ing_s:>10,.0f} lines/s wall (ingest_hour on {ing_lines:,} lines, scaled)"
        )
        print(f"ratio generate / io write (wall):      {gen_s / io_s:6.1f}x")
        print(f"ratio naive text / generate (cpu):     {naive_cpu / gen_cpu:6.2f}x (above 1: faster than json.dumps)")
        print(f"ratio ingest parse / generate (cpu):   {parse_cpu / gen_cpu:6.2f}x (above 1: faster than parsing it)")
        print(f"ratio ingest / generate (cpu):         {ing_cpu / gen_cpu:6.2f}x (target >= 2: under half the ingest)")
        print(f"ratio ingest / generate (wall):        {ing_s / gen_s:6.2f}x")
        print(f"peak RSS {rss_mb:,.0f} MB, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
