"""Screenshots of every dashboard page into docs/img/, from the demo data (`make screenshots`).

The demo is what `make run` builds (the generator's defaults: 3 days), built here in a scratch directory in two
steps: the first two days, then the last one. Between them every mart gets the daily tag of yesterday on its
snapshot, which is what the nightly `maintain` would have tagged had the demo's first two days been yesterday; the
time-travel page then has a day to compare with. The dashboard is served as `make dashboard` serves it and each
page is opened in headless Chromium (tests/support/browser.py, the browser test's driver).
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from logistics_platform.cli.render import render_summary
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.maintenance.tags import tag_name
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import PROJECT_ROOT, local_settings
from tests.support.browser import free_port, look_at_pages, served_dashboard

FIRST_HOURS = 48


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "img")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dashboard-demo-") as scratch:
        root = Path(scratch)
        settings = local_settings(root)
        # As `generate` does for the demo: the period ends today at 00:00 UTC, not before the first partition.
        today = datetime.now(UTC).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0)
        config = GeneratorConfig(start=max(today - timedelta(days=3), settings.partitions_start_datetime))
        print(f"generating the demo landing zone ({config.hours} hours)", flush=True)
        generate(settings.landing_dir, config)
        hours = [hour_key(config.start + timedelta(hours=h)) for h in range(config.hours)]
        for step, keys in enumerate((hours[:FIRST_HOURS], hours[FIRST_HOURS:])):
            print(f"running the pipeline over {keys[0]} .. {keys[-1]}", flush=True)
            summary = run_pipeline(settings, partitions=keys)
            if not summary.ok:
                print(render_summary(summary))
                return 1
            if step == 0:
                catalog = load_catalog(settings)
                tag = tag_name(today.date() - timedelta(days=1))
                for mart in MART_MODELS:
                    table = catalog.load_table(f"marts.{mart}")
                    snapshot = table.current_snapshot()
                    if snapshot is not None:
                        table.manage_snapshots().create_tag(snapshot.snapshot_id, tag).commit()
        print("serving the dashboard and opening its pages", flush=True)
        with served_dashboard(settings, free_port(), root / "dashboard.log") as base:
            seen = look_at_pages(base, args.out, root / "profile")
    for page in seen:
        print(f"{page.screenshot.relative_to(PROJECT_ROOT)}: {page.charts} charts, {page.errors} errors")
    return 0 if all(p.errors == 0 for p in seen) else 1


if __name__ == "__main__":
    raise SystemExit(main())
