"""The `run` command's terminal progress: the ticking line of a stage that reports no progress of its own."""

from __future__ import annotations

import threading
import time

from logistics_platform.cli.render import render_progress
from logistics_platform.cli.run import ProgressTicker
from logistics_platform.pipeline import Progress


def test_a_later_stage_is_redrawn_with_its_time_while_ingest_lines_are_drawn_once() -> None:
    drawn: list[Progress] = []
    ingesting = Progress(24, 72, 80_000, 8.0)
    transforming = Progress(72, 72, 240_000, 24.0, "transforming")
    with ProgressTicker(drawn.append, interval=0.02) as ticker:
        ticker.update(ingesting)
        time.sleep(0.15)
        assert drawn == [ingesting]  # the ingest's own updates carry its ETA: nothing to tick
        ticker.update(transforming)
        time.sleep(0.15)
    ticks = drawn[2:]
    assert drawn[1] == transforming and len(ticks) >= 2
    assert all(t.stage == "transforming" and t.elapsed_seconds == 24.0 for t in ticks)
    assert [t.stage_seconds for t in ticks] == sorted(t.stage_seconds for t in ticks) and ticks[0].stage_seconds > 0
    count = len(drawn)
    time.sleep(0.1)
    assert len(drawn) == count  # stopped with the block


def test_a_write_between_draws_never_interleaves_with_one() -> None:
    events: list[str] = []
    inside = threading.Event()

    def slow_draw(p: Progress) -> None:
        events.append("draw start")
        inside.set()
        time.sleep(0.05)
        events.append("draw end")

    with ProgressTicker(slow_draw, interval=0.01) as ticker:
        ticker.update(Progress(1, 1, 10, 1.0, "transforming"))
        inside.wait()
        ticker.write(lambda: events.append("write"))
    i = events.index("write")
    assert events[i - 1] == "draw end" and (i + 1 == len(events) or events[i + 1] == "draw start")


def test_the_stage_line_counts_its_seconds_once_there_is_one() -> None:
    base = Progress(72, 72, 240_000, 24.0, "transforming")
    assert render_progress(base, width=4) == "[####] 72/72 hours, 240,000 lines, 10,000 lines/s, transforming"
    later = Progress(72, 72, 240_000, 24.0, "transforming", stage_seconds=41.6)
    assert render_progress(later, width=4).endswith("10,000 lines/s, transforming 42s")


def test_run_takes_full_to_sweep_every_landed_hour() -> None:
    from logistics_platform.cli import build_parser

    assert build_parser().parse_args(["run", "--full"]).full is True
    assert build_parser().parse_args(["run"]).full is False
