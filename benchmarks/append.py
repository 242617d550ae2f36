"""Benchmark: a micro-batch (one new file) appended into an arrival hour already holding N files, vs replacing the hour.

Generates two clean arrival hours at the ingest benchmark's volumes (cached under benchmarks/.work/append/) and takes
the second (the first also holds the connector's snapshot reads), orders its files as a sink would land them (by
start offset), and for each fill level N (a quarter, half, and all but the last few files of the hour):

  * ingests the first N files into a fresh catalog (untimed: the hour as earlier micro-batches left it),
  * lands the next file and times ``ingest_hour`` (it must append, reading only that file), ``--repeat`` times,
  * times ``ingest_hour(replace=True)`` of the same hour (every file read again: the cost of the hour as a whole,
    which every micro-batch paid before appends),

and prints, per level, the median append, the replace, and their ratio. An append's cost should not grow with N; a
replace's does. Each timing is of the real ingest (planning from the ingest log and manifests, parsing, Parquet,
Iceberg commits of every table, the ingest log last) on the embedded SQLite catalog.

    .venv/bin/python benchmarks/append.py [--repeat 5] [--levels 0.25,0.5,1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import LandingFile, list_arrival_hours, list_hour_files
from logistics_platform.lib.bronze.schema import TOPICS
from logistics_platform.settings import local_settings

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "append"
START = datetime(2026, 11, 1, 12)


def say(text: str) -> None:
    print(text, flush=True)


def generated_hour() -> tuple[Path, datetime]:
    """A clean arrival hour of landing files, the second of two generated (cached between runs)."""
    landing = WORK / "landing"
    marker = landing / "_generation.json"
    if not marker.exists():
        say(f"generating two clean arrival hours into {landing} ...")
        shutil.rmtree(landing, ignore_errors=True)
        volumes = dict(orders_per_day=24 * 60_000, pings_per_day=24 * 400_000, couriers=2000, flush_size=5_000)
        generate(landing, GeneratorConfig.clean(START, hours=2, seed=7, **volumes))
    return landing, list_arrival_hours(landing)[1]


def arrival_order(landing: Path, hour: datetime) -> list[LandingFile]:
    """The hour's files in the order a sink writes them: by start offset, topics interleaved."""
    files = [f for spec in TOPICS.values() for f in list_hour_files(landing, spec.topic, hour)]
    return sorted(files, key=lambda f: (f.start_offset, f.topic, f.kafka_partition))


def land(files: list[LandingFile], source: Path, target: Path) -> None:
    for f in files:
        dest = target / f.relpath
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / f.relpath, dest)


def measure_level(source: Path, hour: datetime, files: list[LandingFile], held: int, repeat: int) -> dict:
    """Appends of one new file into the hour holding ``held`` files, then a replace of the whole hour."""
    root = WORK / f"level-{held}"
    shutil.rmtree(root, ignore_errors=True)
    settings = local_settings(root, landing_dir=root / "landing")
    land(files[:held], source, settings.landing_dir)
    first = ingest_hour(settings, hour, progress=lambda _: None)
    appends: list[float] = []
    lines: list[int] = []
    for i in range(repeat):
        land([files[held + i]], source, settings.landing_dir)
        t = time.perf_counter()
        report = ingest_hour(settings, hour, progress=lambda _: None)
        appends.append(time.perf_counter() - t)
        if report.mode != "append" or report.read_files != 1:
            raise SystemExit(f"expected an append of one file, got {report.mode} of {report.read_files}")
        lines.append(report.read_lines)
    t = time.perf_counter()
    whole = ingest_hour(settings, hour, replace=True, progress=lambda _: None)
    replace_s = time.perf_counter() - t
    if whole.lines != report.lines or whole.rows != report.rows:
        raise SystemExit(
            f"the appends left {report.lines:,} lines / {report.rows:,} rows, the replace {whole.lines:,} / "
            f"{whole.rows:,}: not the same hour"
        )
    shutil.rmtree(root, ignore_errors=True)
    return {
        "held": held,
        "held_lines": first.lines,
        "append_s": statistics.median(appends),
        "append_max_s": max(appends),
        "new_file_lines": statistics.median(lines),
        "replace_files": held + repeat,
        "replace_lines": whole.lines,
        "replace_s": replace_s,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="appends of one new file per level (default 5)")
    ap.add_argument(
        "--levels", default="0.25,0.5,1", help="fill levels as shares of the hour's files (default 0.25,0.5,1)"
    )
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    landing, hour = generated_hour()
    files = arrival_order(landing, hour)
    total = len(files)
    if total < args.repeat + 2:
        raise SystemExit(f"the hour has {total} files; lower --repeat")
    say(f"hour {hour:%Y-%m-%d %H:00}: {total} files, {sum(f.size for f in files) / 1e6:,.0f} MB")
    say(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    levels = sorted({min(total - args.repeat, max(1, int(float(x) * total))) for x in args.levels.split(",")})
    results = []
    for held in levels:
        say(f"hour holding {held} files: {args.repeat} appends of one new file, then a replace of the whole hour ...")
        r = measure_level(landing, hour, files, held, args.repeat)
        results.append(r)
        say(
            f"  append {r['append_s']:.2f} s median (max {r['append_max_s']:.2f} s, {r['new_file_lines']:,.0f} "
            f"lines), replace {r['replace_s']:.2f} s ({r['replace_files']} files, {r['replace_lines']:,} lines)"
        )
    say("")
    say(
        "| files in the hour | lines in the hour | append 1 new file (median s) | lines appended "
        "| replace whole hour (s) | replace / append |"
    )
    say("|---:|---:|---:|---:|---:|---:|")
    for r in results:
        say(
            f"| {r['held']} | {r['held_lines']:,} | {r['append_s']:.2f} | {r['new_file_lines']:,.0f} | "
            f"{r['replace_s']:.2f} | {r['replace_s'] / r['append_s']:.1f}x |"
        )
    say(f"load average at end {os.getloadavg()[0]:.1f}")
    (WORK / "last_results.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
