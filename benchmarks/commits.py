"""Benchmark: live micro-batches into one open arrival hour, commit cost and Iceberg metadata as batches pile up.

Generates one clean arrival hour (cached under benchmarks/.work/commits/), takes one small file per topic from it as
a template, and then, batch after batch, lands one new file per topic into the same arrival hour (the template's
lines under a new start offset, as a sink's next flush would be named) and runs the platform's own ``ingest_hour``
on it, the path the live landing sensor takes (each batch must be an append of exactly the new files). Per slice of
ten batches (1-10, 41-50, 91-100, 191-200, ... and the last ten) it prints the median CPU seconds of a batch (this
process and its children), the size of ``bronze.orders``' current metadata.json, the files under its ``metadata/``
folder, and the snapshots it keeps; then the ratio of the last slice to the first.

    .venv/bin/python benchmarks/commits.py [--batches 200] [--live-window-seconds S] [--pyiceberg-transaction]
        [--root DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import LandingFile, list_arrival_hours, list_hour_files
from logistics_platform.lib.bronze.schema import TOPICS
from logistics_platform.lib.connections import load_catalog
from logistics_platform.settings import Settings, local_settings

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "commits"
START = datetime(2026, 11, 1, 12)
SLICE = 10


def say(text: str) -> None:
    print(text, flush=True)


def cpu_seconds() -> float:
    """CPU time of this process and its (waited-for) children: ingest workers included."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def templates() -> tuple[Path, list[LandingFile]]:
    """One small landed file per topic of a generated clean hour (generated once, cached between runs)."""
    landing = WORK / "landing"
    if not (landing / "_generation.json").exists():
        say(f"generating a clean arrival hour into {landing} ...")
        shutil.rmtree(landing, ignore_errors=True)
        generate(landing, GeneratorConfig.clean(START, hours=2, seed=7, flush_size=50))
    hour = list_arrival_hours(landing)[-1]
    chosen = []
    for spec in TOPICS.values():
        files = [f for f in list_hour_files(landing, spec.topic, hour) if not f.avro]
        if files:
            chosen.append(min(files, key=lambda f: (f.size, f.relpath)))
    return landing, chosen


def land_batch(template: LandingFile, source: Path, target: Path, batch: int) -> None:
    """The template's bytes under the name a sink's ``batch``-th next flush of its partition would get."""
    offset = template.start_offset + batch * 1_000_000
    suffix = ".json.gz" if template.gzipped else ".json"
    rel = Path(template.relpath).parent / f"{template.topic}+{template.kafka_partition}+{offset:010d}{suffix}"
    dest = target / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / template.relpath, dest)


def metadata_state(settings: Settings) -> tuple[int, int, int]:
    """bronze.orders: (bytes of the current metadata.json, files under metadata/, snapshots kept)."""
    table = load_catalog(settings).load_table("bronze.orders")
    current = Path(urlparse(table.metadata_location).path)
    folder = current.parent
    return current.stat().st_size, sum(1 for p in folder.iterdir() if p.is_file()), len(table.metadata.snapshots)


def slice_ends(batches: int) -> list[int]:
    ends = [e for e in (10, 50, 100, 150, 200, 400, 800, 1600, 3200) if e <= batches]
    return ends if ends and ends[-1] == batches else [*ends, batches]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=200, help="micro-batches of one file per topic (default 200)")
    ap.add_argument(
        "--root", type=Path, default=None, help="where the catalog and landing zone go (default: a temp dir)"
    )
    ap.add_argument(
        "--live-window-seconds",
        type=float,
        default=None,
        help="expire superseded micro-batch snapshots this soon (default: the platform's LIVE_SNAPSHOT_WINDOW); "
        "shows in minutes the steady state a sink reaches after the window",
    )
    ap.add_argument(
        "--pyiceberg-transaction",
        action="store_true",
        help="commit through pyiceberg's own Table.transaction(), the baseline of lib/iceberg_internals.transaction",
    )
    args = ap.parse_args()
    if args.pyiceberg_transaction:
        from pyiceberg.table import Table

        from logistics_platform.lib.bronze import commit

        commit.transaction = Table.transaction  # type: ignore[assignment]
    if args.live_window_seconds is not None:
        from logistics_platform.lib.maintenance import expiry

        expiry.LIVE_SNAPSHOT_WINDOW = timedelta(seconds=args.live_window_seconds)
    if args.batches < SLICE:
        raise SystemExit(f"--batches must be at least {SLICE}")
    WORK.mkdir(parents=True, exist_ok=True)
    source, chosen = templates()
    hour = chosen[0].arrival_hour
    root = args.root or Path(tempfile.mkdtemp(prefix="commits-", dir=WORK))
    shutil.rmtree(root, ignore_errors=True)
    settings = local_settings(root, landing_dir=root / "landing")
    say(
        f"{args.batches} micro-batches into arrival hour {hour:%Y-%m-%d %H:00}, one file per topic each "
        f"({len(chosen)} topics, {sum(f.size for f in chosen):,} bytes a batch); root {root}"
    )
    say(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    arm = "pyiceberg's Table.transaction()" if args.pyiceberg_transaction else "lib/iceberg_internals.transaction"
    say(f"commits through {arm}")
    ends = slice_ends(args.batches)
    cpu: list[float] = []
    rows = []
    for batch in range(1, args.batches + 1):
        for t in chosen:
            land_batch(t, source, settings.landing_dir, batch)
        before = cpu_seconds()
        report = ingest_hour(settings, hour, progress=lambda _: None)
        cpu.append(cpu_seconds() - before)
        expected = "replace" if batch == 1 else "append"
        if report.mode != expected or report.read_files != len(chosen):
            got = f"{report.mode} of {report.read_files}"
            raise SystemExit(f"batch {batch}: expected {expected} of {len(chosen)} files, got {got}")
        if batch in ends:
            md_bytes, md_files, snapshots = metadata_state(settings)
            window = cpu[batch - SLICE : batch]
            rows.append((batch - SLICE + 1, batch, statistics.median(window), md_bytes, md_files, snapshots))
            say(
                f"  batches {batch - SLICE + 1}-{batch}: median {rows[-1][2]:.2f} CPU-s, metadata.json "
                f"{md_bytes / 1024:,.1f} KB, {md_files} files under metadata/, {snapshots} snapshots"
            )
    say("")
    say("| batches | median CPU-s per batch | bronze.orders metadata.json | files under metadata/ | snapshots kept |")
    say("|---|---:|---:|---:|---:|")
    for first, last, med, md_bytes, md_files, snapshots in rows:
        say(f"| {first}-{last} | {med:.2f} | {md_bytes / 1024:,.1f} KB | {md_files} | {snapshots} |")
    say(f"last slice / first slice: {rows[-1][2] / rows[0][2]:.2f}x CPU")
    say(f"load average at end {os.getloadavg()[0]:.1f}")
    if args.root is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
