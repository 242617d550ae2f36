"""`run`: the main job — ingest every landed arrival hour and build everything downstream, through Dagster."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="materialize every landed arrival-hour partition and everything downstream, then print a summary",
    )
    p.add_argument("--landing", type=Path, help="landing zone root (default: the LANDING_DIR setting)")
    p.add_argument(
        "--partitions",
        help="comma-separated arrival-hour keys (YYYY-MM-DD-HH:00), ingested in this order; default: all landed hours",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from logistics_platform.pipeline import PipelineError, run_pipeline
    from logistics_platform.settings import SettingsError, load_settings

    try:
        settings = load_settings()
        if args.landing is not None:
            settings = settings.with_overrides(landing_dir=args.landing.resolve())
        keys = [k.strip() for k in args.partitions.split(",") if k.strip()] if args.partitions else None
        started = time.monotonic()
        summary = run_pipeline(settings, keys, log=lambda msg: print(msg, flush=True))
    except (PipelineError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print()
    print(summary.render())
    print(f"\nfinished in {time.monotonic() - started:.1f}s")
    return 0 if summary.ok else 1
