"""Bronze Parquet encoding: CPU and size of writing the same bronze batches under other table write properties.

    .venv/bin/python benchmarks/parquet_encoding.py [--hours 2] [--repeat 3]

Ingests the first ``--hours`` arrival hours of the ingest benchmark's landing data (benchmarks/ingest.py
generates it, cached in benchmarks/.work/ingest/) with the current bronze table properties, reads every bronze
topic table back in batches of the ingest's batch size, then writes those batches again through the ingest's
own writer (``write_data_files``: pyiceberg's Parquet writer, statistics included) once per variant of the
``write.parquet.*`` properties, variants interleaved round by round. Prints per variant the median CPU seconds
of the writes, the bytes written and both as ratios to pyiceberg's defaults (the bronze properties before
dictionaries were bounded), and checks that every variant reads back to the same values.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from itertools import count
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyiceberg.io.pyarrow import schema_to_pyarrow  # noqa: E402

from logistics_platform.lib.bronze import schema as bs  # noqa: E402
from logistics_platform.lib.bronze.ingest import ingest_hour  # noqa: E402
from logistics_platform.lib.bronze.landing import list_arrival_hours  # noqa: E402
from logistics_platform.lib.bronze.tables import TABLE_PROPERTIES  # noqa: E402
from logistics_platform.lib.bronze.writer import conform, write_data_files  # noqa: E402
from logistics_platform.lib.connections import load_catalog  # noqa: E402
from logistics_platform.settings import local_settings  # noqa: E402

LANDING = ROOT / "benchmarks" / ".work" / "ingest" / "landing-8h"
DICT = "write.parquet.dict-size-bytes"
LEVEL = "write.parquet.compression-level"
ROWS = "write.parquet.page-row-limit"
KEYS = (DICT, LEVEL, ROWS)
# Each variant is the bronze table properties without KEYS, plus its own values of KEYS.
VARIANTS: dict[str, dict[str, str]] = {
    "pyiceberg defaults (2 MiB dictionaries)": {},
    "dict 256 KiB": {DICT: str(256 * 1024)},
    "dict 64 KiB, zstd 1 (current)": {k: TABLE_PROPERTIES[k] for k in KEYS if k in TABLE_PROPERTIES},
    "dict 16 KiB": {DICT: str(16 * 1024)},
    "dict 64 KiB, zstd 3": {DICT: str(64 * 1024), LEVEL: "3"},
    "dict 64 KiB, zstd -1": {DICT: str(64 * 1024), LEVEL: "-1"},
    "dict 64 KiB, page rows 4096": {DICT: str(64 * 1024), ROWS: "4096"},
}
BASE = "pyiceberg defaults (2 MiB dictionaries)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=int, default=2, help="arrival hours of the landing data to ingest (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of writes per variant (default 3)")
    args = ap.parse_args()
    if not LANDING.exists():
        raise SystemExit(f"no landing data in {LANDING}: run benchmarks/ingest.py --skip-dlt once to generate it")
    common = {k: v for k, v in TABLE_PROPERTIES.items() if k not in KEYS}
    with tempfile.TemporaryDirectory(prefix="parquet-encoding-") as tmp:
        settings = local_settings(Path(tmp), landing_dir=LANDING)
        for hour in list_arrival_hours(LANDING)[: args.hours]:
            ingest_hour(settings, hour)
        catalog = load_catalog(settings)
        batches: dict[str, list[pa.Table]] = {}
        for spec in bs.TOPICS.values():
            table = catalog.load_table(spec.identifier)
            data = conform(table.scan().to_arrow(), schema_to_pyarrow(table.schema(), include_field_ids=True))
            step = settings.ingest_batch_rows
            batches[spec.identifier] = [data.slice(i, step) for i in range(0, data.num_rows, step)]
        rows = sum(b.num_rows for bs_ in batches.values() for b in bs_)
        print(f"{rows:,} bronze rows of {args.hours} hours, {sum(map(len, batches.values()))} batches", flush=True)
        cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
        size: dict[str, int] = {}
        for rnd in range(args.repeat):
            for name, props in VARIANTS.items():
                seconds, written = write_all(catalog, batches, {**common, **props}, check=rnd == 0)
                cpu[name].append(seconds)
                size[name] = written
            print(f"round {rnd + 1}/{args.repeat} done", flush=True)
    base_cpu, base_size = statistics.median(cpu[BASE]), size[BASE]
    print("")
    print("| variant | write CPU s (median) | CPU vs defaults | bytes | size vs defaults |")
    print("|---|---:|---:|---:|---:|")
    for name in VARIANTS:
        c = statistics.median(cpu[name])
        print(f"| {name} | {c:.2f} | {c / base_cpu:.2f}x | {size[name]:,} | {size[name] / base_size:.3f}x |")
    return 0


def write_all(catalog, batches: dict[str, list[pa.Table]], props: dict[str, str], check: bool) -> tuple[float, int]:
    """CPU seconds and bytes of writing every batch as data files of its table with ``props``."""
    written = 0
    seconds = 0.0
    for identifier, parts in batches.items():
        table = catalog.load_table(identifier)
        with table.transaction() as tx:  # the previous variant's keys go first, so that defaults apply again
            tx.remove_properties(*(k for k in KEYS if k in table.properties))
            tx.set_properties(props)
        table = catalog.load_table(identifier)
        write_uuid, counter = uuid.uuid4(), count(0)
        for batch in parts:
            t = time.process_time()  # all threads: pyiceberg writes in its executor's threads
            files = write_data_files(table, batch, write_uuid, counter)
            seconds += time.process_time() - t
            for f in files:
                written += f.file_size_in_bytes
                path = f.file_path.removeprefix("file://")
                if check and not pq.read_table(path).equals(batch.select(pq.read_schema(path).names)):
                    raise SystemExit(f"{identifier}: {props} changed values")
                Path(path).unlink()
    return seconds, written


if __name__ == "__main__":
    sys.exit(main())
