"""The generator's parts on their own: the period, the commit queue, the fault plans, the layout's guards, the
writer's file text and thread, and the ground truth's order counts."""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from random import Random

import pyarrow as pa
import pytest

from logistics_platform.generator import encode as E
from logistics_platform.generator.cdc import CommitQueue
from logistics_platform.generator.config import TABLES, GeneratorConfig
from logistics_platform.generator.faults import encoders, late_boost, plan_delayed_files
from logistics_platform.generator.layout import Layout
from logistics_platform.generator.model import (
    DECIMAL_NUMBERS,
    EPOCH_MICROS,
    HOUR_US,
    SECOND,
    T_ORDERS,
    T_PAYMENTS,
    T_PINGS,
    FastRandom,
    Period,
)
from logistics_platform.generator.pings import ping_interval_us
from logistics_platform.generator.summary import LATE, TOMBSTONES, TopicStats, order_truth
from logistics_platform.generator.writer import FileWriter, PingText, cdc_file
from logistics_platform.lib.timekeys import epoch_micros

START = datetime(2026, 11, 1)
START_US = epoch_micros(START)


def test_period_of_a_config() -> None:
    period = Period.of(GeneratorConfig(start=START, hours=10, allowed_lateness_hours=1.5, tip_amount_from=0.5))
    assert (period.start_us, period.end_us, period.hours) == (START_US, START_US + 10 * HOUR_US, 10)
    assert period.late_us == 5400 * SECOND and period.tip_from_us == START_US + 5 * HOUR_US
    assert period.hour_of(START_US + 3 * HOUR_US - 1) == 2 and period.hour_start(3) == START_US + 3 * HOUR_US
    assert Period.of(GeneratorConfig(start=START, tip_amount_from=None)).tip_from_us is None
    assert Period.of(GeneratorConfig(start=START, tip_amount_from=1.0)).tip_from_us is None


def test_commit_queue_orders_by_time_then_plan_and_drops_what_never_commits() -> None:
    queue = CommitQueue(Period.of(GeneratorConfig(start=START, hours=2)))
    t = START_US + HOUR_US + 5
    queue.add([(t, [["second"]], False), (START_US + 7, [["early"]], False), (START_US + 2 * HOUR_US, [["x"]], False)])
    queue.add([(t, [["third"]], False), (t - 1, [["first"]], True)])
    assert [chs[0][0] for _, _, chs, _ in queue.pop(1)] == ["first", "second", "third"]
    assert [chs[0][0] for _, _, chs, _ in queue.pop(0)] == ["early"]
    assert queue.pop(2) == [] and queue.by_hour == {}  # at the end of the period: never committed
    with pytest.raises(RuntimeError, match="before the period starts"):
        queue.add([(START_US - 1, [], False)])


def test_delayed_files_plan_distinct_hours_only_where_a_file_can_be_late() -> None:
    cfg = GeneratorConfig(start=START, hours=12, delayed_files=5, delayed_file_hours=3)
    plan = plan_delayed_files(cfg, FastRandom(3))
    assert len(plan) == 5 and {ti for ti, _ in plan} == {T_ORDERS, T_PAYMENTS, T_PINGS}
    assert all(0 <= a < 12 - 3 for _, a in plan)
    assert plan == plan_delayed_files(cfg, FastRandom(3))
    assert plan_delayed_files(replace(cfg, hours=3), FastRandom(3)) == set()


def test_late_boost_raises_the_odds_by_the_share_that_can_still_be_late() -> None:
    cfg = GeneratorConfig(start=START, hours=24)
    assert late_boost(cfg, 0) == pytest.approx(1.0)
    assert 1.0 < late_boost(cfg, 3) < late_boost(cfg, 6)
    assert late_boost(cfg, 24) == 0.0  # nothing can arrive 24 hours later inside a 24-hour period


def test_encoders_of_the_flags() -> None:
    assert encoders(0) == (E.ts_iso, E.dec_str)
    assert encoders(EPOCH_MICROS | DECIMAL_NUMBERS) == (E.ts_epoch, E.dec_num)


def test_ping_interval_gives_the_daily_pings_over_the_trips() -> None:
    cfg = GeneratorConfig(start=START, orders_per_day=1000, pings_per_day=50_000, cancel_rate=0.0)
    assert ping_interval_us(cfg) == int(1000 * 3060.0 / 50_000 * SECOND)
    assert ping_interval_us(replace(cfg, pings_per_day=0)) == 0
    assert ping_interval_us(replace(cfg, pings_per_day=10**9)) == SECOND // 10  # at most 10 pings a second


def test_order_truth_counts_what_exists_at_the_end() -> None:
    final = {1: ("delivered", 1250, False), 2: ("delivered", 999, True), 3: ("cancelled", 500, False)}
    assert order_truth(final) == {
        "orders_planned": 3,
        "orders_existing": 2,
        "orders_deleted": 1,
        "orders_delivered": 1,
        "gross_revenue_delivered": "12.50",
    }


def _layout(tmp_path: Path, writer: FileWriter, stats: list[TopicStats]) -> Layout:
    cfg = GeneratorConfig(start=START, hours=4, flush_size=2, gzip_rate=0.0, allowed_lateness_hours=1)
    return Layout(tmp_path, cfg, Period.of(cfg), FastRandom(1), stats, writer, set())


def test_layout_files_lines_by_partition_counts_late_and_tombstones_and_refuses_written_hours(tmp_path: Path) -> None:
    stats = [TopicStats() for _ in TABLES]
    writer = FileWriter()
    layout = _layout(tmp_path, writer, stats)
    hour1 = START_US + HOUR_US
    for n, key in enumerate((100_000, 100_001, 100_002, 100_003)):  # orders: 3 partitions by key
        layout.add(T_ORDERS, hour1 + n, f"line{n}", key, 10 + n, 1, hour1)
    layout.add(T_ORDERS, hour1 + 9, "delete\nnull", 100_003, 20, 2, START_US - 1)  # late: more than L before
    layout.add_corrupted(T_ORDERS, hour1 + 10, "{broken", 100_000)
    layout.flush(0)
    layout.flush(1)
    writer.close()
    assert layout.unwritten() == []
    landed = {p.relative_to(tmp_path).as_posix(): p.read_text() for p in (tmp_path / "topics").rglob("*.json")}
    folder = "topics/oltp.public.orders/dt=2026-11-01/hr=01/oltp.public.orders"
    assert landed == {
        f"{folder}+0+0000000000.json": "line2\n",
        f"{folder}+1+0000000000.json": "line0\nline3\n",  # flush_size 2: a new file, offsets go on
        f"{folder}+1+0000000002.json": "delete\nnull\n{broken\n",
        f"{folder}+2+0000000000.json": "line1\n",
    }
    assert os.stat(tmp_path / f"{folder}+2+0000000000.json").st_mtime == (hour1 + 1) // SECOND
    assert stats[T_ORDERS].hour(1)[LATE] == 1 and stats[T_ORDERS].hour(1)[TOMBSTONES] == 1
    assert sum(f["bytes"] for f in layout.files) == sum(len(t) for t in landed.values())
    with pytest.raises(RuntimeError, match="after that hour was written"):
        layout.add(T_ORDERS, hour1 + 5, "too late", 100_000, 30, 1, hour1)


def test_cdc_file_text_lines_and_last_arrival() -> None:
    records = [(5, "a", 1, 10, 1), (7, "b\nnull", 1, 11, 2), (9, 'x"\udce9', None, 0, 1)]
    raw, lines, last = cdc_file(records)
    assert raw == b'a\nb\nnull\nx"\xe9\n' and lines == 4 and last == 9


def test_ping_text_holds_the_same_values_as_the_reference_line() -> None:
    t = START_US + 2 * HOUR_US + 61 * SECOND + 5
    rows = pa.table(
        {
            "arrival": [t + 1, t + 2],
            "part": [0, 0],
            "t": [t, t + 1_000_000],
            "cid": [1001, 1002],
            "oid": [100_001, None],
            "lat": [-23.5, -23.1234567],
            "lon": [-46.25, -46.7654321],
            "speed": [12.34, 0.0],
            "pid": ["0f0e0d0c-0b0a-4090-a080-706050403020", "00000000-0000-4000-a000-000000000001"],
        }
    )
    extra = pa.table({"arrival": [t + 3], "part": [0], "line": pa.array([b"not json\n"], pa.binary())})
    text = PingText(pa.concat_tables([rows, extra], promote_options="default"), pa.array([1, 2, 0], pa.uint64()))
    lines = bytes(text.text(0, 3)).decode().splitlines()
    assert lines[1] == "not json"
    for line, r in zip([lines[2], lines[0]], rows.to_pylist(), strict=True):
        expected = E.ping_line(r["pid"], r["cid"], r["oid"], r["lat"], r["lon"], r["speed"], r["t"])
        assert json.loads(line) == json.loads(expected)


def test_writer_gzips_reproducibly_and_reports_a_failure_in_one_line(tmp_path: Path) -> None:
    writer = FileWriter()
    record: dict[str, int] = {}
    writer.put(tmp_path / "a" / "f.json.gz", lambda: b"x\n" * 100, True, 1_800_000_000, record)
    writer.close()
    data = (tmp_path / "a" / "f.json.gz").read_bytes()
    assert gzip.decompress(data) == b"x\n" * 100 and data == gzip.compress(b"x\n" * 100, compresslevel=1, mtime=0)
    assert record["bytes"] == len(data) and os.stat(tmp_path / "a" / "f.json.gz").st_mtime == 1_800_000_000
    (tmp_path / "blocker").write_text("a file where a folder should be")
    failing = FileWriter()
    failing.put(tmp_path / "blocker" / "f.json", b"x\n", False, 0, {})
    with pytest.raises(RuntimeError, match="writing landed files failed") as info:
        failing.close()
    assert "\n" not in str(info.value)


def test_fast_random_stays_in_range() -> None:
    rng = FastRandom(7)
    assert all(10 <= rng.randrange(10, 13) < 13 for _ in range(1000))
    assert {rng.randint(1, 3) for _ in range(1000)} == {1, 2, 3}
    assert isinstance(rng, Random)
