"""The generator: the OLTP world hour by hour, landed as a Kafka Connect sink would (docs/internals/generator.md)."""

from __future__ import annotations

import gc
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from logistics_platform.generator import cdc, faults, summary
from logistics_platform.generator.config import TABLES, GeneratorConfig
from logistics_platform.generator.layout import Layout
from logistics_platform.generator.model import SECOND, T_PINGS, Change, FastRandom, Period
from logistics_platform.generator.orders import OrderBook
from logistics_platform.generator.pings import Trips
from logistics_platform.generator.roster import Roster
from logistics_platform.generator.writer import FileWriter

GENERATION_FILE = "_generation.json"


def run(out: Path, cfg: GeneratorConfig, progress: bool) -> dict[str, Any]:
    """Generate the landing zone of ``cfg`` into ``out/topics`` and return the summary (docs/internals/generator.md)."""
    rng = FastRandom(cfg.seed)
    period = Period.of(cfg)
    stats = [summary.TopicStats() for _ in TABLES]
    wal = (24_000_000 + rng.randrange(1_000_000), 700 + rng.randrange(1000))  # the LSN and txId at the start
    delayed = faults.plan_delayed_files(cfg, rng)
    writer = FileWriter()
    try:
        layout = Layout(out, cfg, period, rng, stats, writer, delayed)
        anomalies = faults.Faults(cfg, period, rng, stats, layout)
        queue = cdc.CommitQueue(period)
        stream = cdc.ChangeStream(period, rng, stats, queue, anomalies, layout, wal)
        # The connector's snapshot reads every tenant, courier and open order one second into the period.
        snap_us = period.start_us + SECOND
        snapshot: list[Change] = []
        roster = Roster(cfg, period, rng, anomalies, queue, snap_us, snapshot)
        tenants, couriers = roster.plan_tenants(), roster.plan_couriers()
        trips = Trips(cfg, period, rng, stats[T_PINGS], anomalies, couriers)
        orders = OrderBook(cfg, period, rng, anomalies, queue, tenants, couriers, trips)
        snapshot.extend(orders.plan_snapshot(snap_us))
        queue.add([(snap_us, snapshot, cfg.snapshot_rate > 0)])
        for h in range(cfg.hours):
            orders.plan_hour(h)
            stream.commit_hour(h)
            for runs in trips.batches():
                rows = trips.expand(runs)
                anomalies.copy_pings(rows)
                layout.add_pings(rows.drop_columns(["dice"]))
            layout.flush(h)
            if progress:
                show_progress(h + 1, cfg.hours, layout.lines_written)
        leftovers = layout.unwritten()
        if leftovers:  # a routing bug, never data: fail loudly rather than drop lines silently
            raise RuntimeError(f"generator left lines unwritten for (topic, hour) {leftovers[:5]}")
    except BaseException:
        writer.close(raise_error=False)
        raise
    writer.close()
    truth = {"tenants": len(tenants.ids), "couriers": couriers.existing, **summary.order_truth(orders.final)}
    return summary.build_summary(cfg, period, stats, layout.files, layout.delayed, truth)


def show_progress(done: int, total: int, lines: int) -> None:
    """A one-line progress bar on stderr (no dependency): hours done and lines written."""
    filled = 30 * done // max(1, total)
    end = "\n" if done >= total else ""
    sys.stderr.write(f"\rgenerate [{'#' * filled}{'.' * (30 - filled)}] {done}/{total} h, {lines:,} lines{end}")
    sys.stderr.flush()


def generate(out_dir: Path | str, config: GeneratorConfig, progress: bool = False) -> dict[str, Any]:
    """Write the landing zone for ``config`` under ``out_dir`` (docs/internals/generator.md); its summary."""
    out = Path(out_dir)
    topics_dir = out / "topics"
    if topics_dir.exists() and any(topics_dir.iterdir()):
        raise FileExistsError(
            f"{topics_dir} already holds landed files; generate into an empty directory "
            "(or remove it) so record addresses (topic, partition, offset) never repeat"
        )
    out.mkdir(parents=True, exist_ok=True)
    # Built in a hidden sibling, moved into place at the end: an interrupted run leaves no half-written landing zone.
    staging = out / ".generating"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    # The engine makes no reference cycles: the cyclic GC would only rescan the pending hours (~15% of the run).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = run(staging, config, progress)
    finally:
        if gc_was_enabled:
            gc.enable()
    if (staging / "topics").exists():
        (staging / "topics").rename(topics_dir)  # rename(2) replaces an empty directory (checked above)
    shutil.rmtree(staging)
    (out / GENERATION_FILE).write_text(json.dumps(result, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return result
