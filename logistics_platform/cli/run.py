"""`run`: the main job — ingest the landed arrival hours that changed, build everything downstream, through Dagster."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from logistics_platform.pipeline import Progress

LOG_FILE = "run.log"


HELP = "materialize the landed arrival hours new or changed since their ingest and what is downstream, then a summary"
ARGS = {
    "--landing": {"type": Path, "help": "landing zone root (default: the LANDING_DIR setting)"},
    "--partitions": {
        "help": "comma-separated arrival-hour keys (YYYY-MM-DD-HH:00); consecutive ones are ingested together, in "
        "runs of up to INGEST_MAX_HOURS_PER_RUN hours; default: the landed hours (of the last 7 days, and older "
        "never-ingested ones) whose files bronze.ingest_log does not record as they are (new, grown, changed)"
    },
    "--full": {
        "action": "store_true",
        "help": "run the ingest over every landed hour, also those bronze.ingest_log records as up to date",
    },
    "--accept-type": {
        "metavar": "TABLE.COLUMN",
        "help": "the way out of a schema incident: make the column text, then re-ingest whole the hours it touched "
        "(they replace --partitions) and build downstream (docs/operations.md, Schema incidents)",
    },
    "--accept-rename": {
        "metavar": "TABLE.COLUMN=NEW",
        "help": "the way out of a schema incident where the source renamed a contract column: read its new name NEW "
        "as COLUMN from now on, then re-ingest whole the hours it quarantined and build downstream "
        "(docs/operations.md, Schema incidents)",
    },
    "--verbose": {
        "action": "store_true",
        "help": f"show dbt's and Dagster's step logs in the terminal (default: the run's event log and {LOG_FILE})",
    },
}


@contextlib.contextmanager
def _quiet_into(log_path: Path) -> Iterator[TextIO]:
    """Send everything written to stdout/stderr (dbt, Dagster, warnings) into ``log_path``; yield the terminal."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    terminal = os.fdopen(os.dup(1), "w", buffering=1)
    with open(log_path, "ab") as log_file:
        for fd in saved:
            os.dup2(log_file.fileno(), fd)
        try:
            yield terminal
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            terminal.close()


class ProgressTicker:
    """Draws each update, and re-draws a later stage's (the transform reports none) every ``interval`` s, ticking."""

    def __init__(self, draw: Callable[[Progress], None], interval: float = 1.0) -> None:
        self._draw = draw
        self._interval = interval
        self._lock = threading.Lock()
        self._last: Progress | None = None
        self._since = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="progress-ticker", daemon=True)

    def __enter__(self) -> ProgressTicker:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def update(self, p: Progress) -> None:
        with self._lock:
            self._last, self._since = p, time.monotonic()
            self._draw(p)

    def write(self, action: Callable[[], object]) -> None:
        """Run ``action`` (another write to the terminal) between two draws, never during one."""
        with self._lock:
            action()

    def _tick(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                if self._last is not None and self._last.stage != "ingest":
                    self._draw(dataclasses.replace(self._last, stage_seconds=time.monotonic() - self._since))


def run(args: argparse.Namespace) -> int:
    from logistics_platform.cli.render import render_progress, render_summary
    from logistics_platform.lib.bronze.incidents import accept_as_text, accept_rename, replayed
    from logistics_platform.lib.connections import catalog_of
    from logistics_platform.lib.timekeys import hour_key
    from logistics_platform.pipeline import PipelineError, run_pipeline
    from logistics_platform.settings import SettingsError, load_settings

    try:
        settings = load_settings()
        if args.landing is not None:
            settings = settings.with_overrides(landing_dir=args.landing.resolve())
        keys = [k.strip() for k in args.partitions.split(",") if k.strip()] if args.partitions else None
        if args.accept_type and args.accept_rename:
            raise ValueError("--accept-type and --accept-rename each end one incident: give one of them per run")
        if args.accept_type:  # the column made text first (lib/bronze/incidents.py); its hours are re-read whole
            table, _, column = args.accept_type.partition(".")
            keys = [hour_key(h) for h in accept_as_text(catalog_of(settings), table, column)]
        if args.accept_rename:  # the rename recorded first; the hours it quarantined are re-read whole
            table, _, rename = args.accept_rename.partition(".")
            column, _, new = rename.partition("=")
            if not (table and column and new):
                wanted = "expected TABLE.COLUMN=NEW, e.g. orders.region=zone"
                raise ValueError(f"--accept-rename {args.accept_rename!r}: {wanted}")
            keys = [hour_key(h) for h in accept_rename(catalog_of(settings), table, column, new)]
        accepting = bool(args.accept_type or args.accept_rename)
        options = {"full": args.full, "replace": accepting}
        log_path = settings.duckdb_path.parent / LOG_FILE
        started = time.monotonic()
        if args.verbose:
            summary = run_pipeline(settings, keys, log=lambda msg: print(msg, flush=True), verbose=True, **options)
        else:
            with _quiet_into(log_path) as terminal:
                interactive = terminal.isatty()

                def show(p: Progress) -> None:
                    line = render_progress(p)
                    terminal.write(f"\r{line}\033[K" if interactive else f"{line}\n")
                    terminal.flush()

                # A file or pipe gets each update once; only a terminal's line is re-drawn while it ticks.
                with ProgressTicker(show, interval=1.0 if interactive else 3600.0) as ticker:

                    def say(msg: str) -> None:
                        print(msg, flush=True)  # into the log file; a failure also on the terminal (the summary has it)
                        if "FAILED" in msg:
                            ticker.write(lambda: terminal.write(f"\n{msg}\n"))

                    summary = run_pipeline(settings, keys, log=say, progress=ticker.update, **options)
                if interactive:
                    terminal.write("\n")
    except (PipelineError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if accepting and summary.ok:
        replayed(catalog_of(settings), table, column)
    print(f"\n{render_summary(summary)}")
    where = "" if args.verbose else f" (dbt and Dagster logs: {log_path})"
    print(f"\nfinished in {time.monotonic() - started:.1f}s{where}")
    return 0 if summary.ok else 1
