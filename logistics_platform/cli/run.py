"""`run`: the main job — ingest every landed arrival hour and build everything downstream, through Dagster."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

LOG_FILE = "run.log"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="materialize every landed arrival-hour partition and everything downstream, then print a summary",
    )
    p.add_argument("--landing", type=Path, help="landing zone root (default: the LANDING_DIR setting)")
    p.add_argument(
        "--partitions",
        help="comma-separated arrival-hour keys (YYYY-MM-DD-HH:00); consecutive ones are ingested together, in "
        "runs of up to INGEST_MAX_HOURS_PER_RUN hours; default: all landed hours",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help=f"show dbt's and Dagster's step logs in the terminal (default: the run's event log and {LOG_FILE})",
    )
    p.set_defaults(func=run)


@contextlib.contextmanager
def _quiet_into(log_path: Path) -> Iterator[TextIO]:
    """Send everything written to stdout/stderr (dbt, Dagster, warnings) into ``log_path``; yield the terminal."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(1), "w", buffering=1)
    with open(log_path, "ab") as log_file:
        os.dup2(log_file.fileno(), 1)
        os.dup2(log_file.fileno(), 2)
        try:
            yield terminal
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            terminal.close()


def run(args: argparse.Namespace) -> int:
    from logistics_platform.pipeline import PipelineError, Progress, render_progress, run_pipeline
    from logistics_platform.settings import SettingsError, load_settings

    verbose = bool(getattr(args, "verbose", False))
    try:
        settings = load_settings()
        if args.landing is not None:
            settings = settings.with_overrides(landing_dir=args.landing.resolve())
        keys = [k.strip() for k in args.partitions.split(",") if k.strip()] if args.partitions else None
        log_path = settings.duckdb_path.parent / LOG_FILE
        started = time.monotonic()
        if verbose:
            summary = run_pipeline(settings, keys, log=lambda msg: print(msg, flush=True), verbose=True)
        else:
            with _quiet_into(log_path) as terminal:
                interactive = terminal.isatty()

                def show(p: Progress) -> None:
                    line = render_progress(p)
                    terminal.write(f"\r{line}\033[K" if interactive else f"{line}\n")
                    terminal.flush()

                def say(msg: str) -> None:
                    print(msg, flush=True)  # into the log file; a failure also on the terminal (the summary has it)
                    if "FAILED" in msg:
                        terminal.write(f"\n{msg}\n")

                summary = run_pipeline(settings, keys, log=say, progress=show)
                if interactive:
                    terminal.write("\n")
    except (PipelineError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print()
    print(summary.render())
    where = "" if verbose else f" (dbt and Dagster logs: {log_path})"
    print(f"\nfinished in {time.monotonic() - started:.1f}s{where}")
    return 0 if summary.ok else 1
