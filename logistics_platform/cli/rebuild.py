"""`rebuild`: rebuild bronze and the marts from the landing zone aside, validate, then swap them in.

The live tables are untouched unless the whole rebuild succeeded and validated. See lib/operate/rebuild.py for
the design; `--rollback DIR` restores what a swap replaced.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logistics_platform.lib.operate.rebuild import ModelBuild
    from logistics_platform.settings import Settings


HELP = "rebuild bronze + marts from the landing zone into fresh tables; swap in only if it succeeded"
DESCRIPTION = __doc__
ARGS = {
    "--no-swap": {"action": "store_true", "help": "build and validate only; leave the live tables alone"},
    "--keep": {"action": "store_true", "help": "keep the staging directory of a failed or --no-swap run"},
    "--rollback": {"type": Path, "metavar": "STAGING_DIR", "help": "undo the swap recorded in STAGING_DIR"},
}


def staged_models(staged: Settings) -> ModelBuild | None:
    """The transform job of the code location built on ``staged``, run in a throwaway Dagster instance."""
    import dagster as dg

    from logistics_platform.definitions import build_definitions
    from logistics_platform.defs.constants import TRANSFORM_GROUPS, TRANSFORM_JOB
    from logistics_platform.lib.transform.arrival_window import ArrivalWindow

    defs = build_definitions(staged)
    graph = defs.resolve_asset_graph()
    if not any(graph.get(k).group_name in TRANSFORM_GROUPS for k in graph.materializable_asset_keys):
        return None

    def run_range(first: str, last: str, tags: Mapping[str, str]) -> bool:
        run_tags = {**ArrivalWindow.of_hours(first, last).run_tags(), **tags}
        with dg.instance_for_test() as instance:
            job = defs.resolve_job_def(TRANSFORM_JOB)
            return job.execute_in_process(instance=instance, tags=run_tags, raise_on_error=False).success

    return run_range


def run(args: argparse.Namespace) -> int:
    from logistics_platform.cli.errors import CommandError
    from logistics_platform.defs.constants import MARTS
    from logistics_platform.lib.operate.rebuild import RebuildError, discard, rebuild, rollback
    from logistics_platform.settings import load_settings

    settings = load_settings()  # a bad setting: one line from cli/errors.py
    if args.rollback:
        if not (args.rollback / "swap.json").exists():
            raise CommandError(
                f"{args.rollback}/swap.json not found: not a swapped rebuild directory; give the one the swap printed"
            )
        names = rollback(settings, args.rollback)
        print(f"rolled back {len(names)} tables and the DuckDB file to their state before the swap")
        return 0

    print("Stop the sensors and schedules (or let no run write) while the swap happens; see the README runbook.")
    started = time.monotonic()
    try:
        result = rebuild(settings, MARTS, staged_models, swap_in=not args.no_swap, log=lambda m: print(m, flush=True))
    except RebuildError as exc:
        print(f"rebuild FAILED, live tables unchanged: {exc}", file=sys.stderr)
        print("the staging directory is left for inspection under <DUCKDB_PATH dir>/_rebuild/", file=sys.stderr)
        return 1
    if args.no_swap:
        print(f"validated build in {result.staging_root} (not swapped) in {time.monotonic() - started:.0f}s")
        if not args.keep:
            discard(result.staging_root)
            print("staging directory removed (use --keep to inspect it)")
        return 0
    print(
        f"rebuilt {len(result.partitions)} arrival hours and swapped in {len(result.swapped)} tables in "
        f"{time.monotonic() - started:.0f}s. Undo: logistics-platform rebuild --rollback {result.staging_root}"
    )
    return 0
