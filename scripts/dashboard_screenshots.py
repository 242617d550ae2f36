"""Screenshots of every dashboard page into docs/img/, from the demo data (`make screenshots`).

The demo is what `make run` builds (the generator's defaults: 3 days), but with its last hour the open one, the
arrival hour the clock is in: the landing zone as a live sink leaves it now. The open hour keeps only the lines
emitted by now (a sink cannot have landed the rest yet), plus one burst of late deliveries in a window just ended,
so that the SLA page shows a breach (the demo's ~1 delivery per region and window never reaches SLA_MIN_DELIVERIES).
It is built in a scratch directory in three steps: the first two days, then the rest of the closed hours, then the
open hour. Between the first two every mart gets the daily tag of yesterday on its snapshot, which is what the
nightly `maintain` would have tagged had the demo's first two days been yesterday; the time-travel page then has a
day to compare with. The dashboard is served as `make dashboard` serves it and each page is opened in headless
Chromium (tests/support/browser.py, the browser test's driver). ``--keep DIR`` builds the demo in DIR and keeps
it; run again with the same DIR, it only serves the demo there and takes the screenshots.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from logistics_platform.cli.render import render_summary
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze.landing import hour_dir
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.dashboard.sla import window_of
from logistics_platform.lib.maintenance.tags import tag_name
from logistics_platform.lib.timekeys import epoch_micros, hour_key, hour_start, utc_naive
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.pipeline import run_pipeline
from logistics_platform.settings import PROJECT_ROOT, Settings, local_settings
from tests.support.bronze import cdc, dump, iso, order, write_file
from tests.support.browser import free_port, look_at_pages, served_dashboard
from tests.support.dashboard_world import publish_hours

FIRST_HOURS = 48
ORDERS_TOPIC = "oltp.public.orders"
# The burst: deliveries, and where its orders, log positions and file offset start (far past the generator's).
BURST = 30
BURST_ORDER_ID = 900_000_000
BURST_LSN = 9_000_000_000
BURST_OFFSET = 9_000_000_000


def emitted_micros(line: bytes) -> int | None:
    """When the source emitted a landed line: the envelope's ts_ms, or a ping's recorded_at (None: unreadable)."""
    try:
        value = json.loads(line)
        if "payload" in value and "schema" in value:
            value = value["payload"]
        stamp = value.get("recorded_at")
        if isinstance(stamp, str):
            return epoch_micros(datetime.fromisoformat(stamp))
        return stamp if isinstance(stamp, int) else int(value["ts_ms"]) * 1000
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def keep_landed_by(landing: Path, hour: datetime, now: datetime) -> tuple[int, int]:
    """Drop from the files of ``hour`` every line emitted after ``now`` (unreadable lines stay: a sink lands those
    too), and the files left empty; returns (lines kept, lines dropped)."""
    cutoff, kept, dropped = epoch_micros(now), 0, 0
    for topic in sorted(p.name for p in (landing / "topics").iterdir()):
        for path in sorted((landing / hour_dir(topic, hour)).glob("*.json*")):
            zipped = path.suffix == ".gz"
            data = gzip.decompress(path.read_bytes()) if zipped else path.read_bytes()
            lines = data.splitlines()
            keep = [line for line in lines if (emitted := emitted_micros(line)) is None or emitted <= cutoff]
            kept, dropped = kept + len(keep), dropped + len(lines) - len(keep)
            if not keep:
                path.unlink()
            elif len(keep) < len(lines):
                text = b"".join(line + b"\n" for line in keep)
                path.write_bytes(gzip.compress(text, mtime=0) if zipped else text)
    return kept, dropped


def land_burst(settings: Settings, hour: datetime, now: datetime) -> str:
    """A burst of late deliveries in the window before the one ``now`` is in, landed in ``hour``; returns its region."""
    catalog = load_catalog(settings)
    regions = sorted(set(catalog.load_table("marts.fct_region_sla").scan().to_arrow()["region"].to_pylist()))
    tenant = catalog.load_table("marts.dim_tenant").scan().to_arrow()["tenant_id"][0].as_py()
    courier = catalog.load_table("marts.dim_courier").scan().to_arrow()["courier_id"][0].as_py()
    region = regions[len(regions) // 2]
    window = window_of(now, timedelta(minutes=settings.sla_window_minutes)) - timedelta(
        minutes=settings.sla_window_minutes
    )
    lines = []
    for n in range(BURST):
        created, at = window - timedelta(minutes=45), window + timedelta(seconds=5 + 9 * n)
        row = order(
            BURST_ORDER_ID + n,
            created,
            tenant_id=tenant,
            courier_id=courier,
            region=region,
            promised_at=iso(window + timedelta(minutes=1)),
        )
        lines.append(dump(cdc("c", "orders", row, lsn=BURST_LSN + 10 * n, ts=created)))
        row = {**row, "status": "delivered", "delivered_at": iso(at), "updated_at": iso(at)}
        lines.append(dump(cdc("u", "orders", row, lsn=BURST_LSN + 10 * n + 5, ts=at)))
    write_file(settings.landing_dir, ORDERS_TOPIC, hour, 0, BURST_OFFSET, lines)
    return f"{region} at {window:%H:%M}"


def build_demo(root: Path) -> bool:
    """The demo up to the open hour under ``root``, published in three steps; False when a pipeline run failed."""
    settings = local_settings(root)
    now = utc_naive(datetime.now(UTC))
    open_hour = hour_start(now)
    today = open_hour.replace(hour=0)
    start = max(open_hour - timedelta(hours=71), settings.partitions_start_datetime)
    config = GeneratorConfig(start=start, hours=int((open_hour - start) / timedelta(hours=1)) + 1)
    print(f"generating the demo landing zone ({config.hours} hours, the last one open)", flush=True)
    generate(settings.landing_dir, config)
    kept, dropped = keep_landed_by(settings.landing_dir, open_hour, now)
    print(f"open hour {hour_key(open_hour)}: {kept} lines landed by {now:%H:%M:%S}, {dropped} not yet", flush=True)
    closed = [hour_key(config.start + timedelta(hours=h)) for h in range(config.hours - 1)]
    for step, keys in enumerate((closed[:FIRST_HOURS], closed[FIRST_HOURS:])):
        print(f"running the pipeline over {keys[0]} .. {keys[-1]}", flush=True)
        summary = run_pipeline(settings, partitions=keys)
        if not summary.ok:
            print(render_summary(summary))
            return False
        if step == 0:
            catalog = load_catalog(settings)
            tag = tag_name(today.date() - timedelta(days=1))
            for mart in MART_MODELS:
                table = catalog.load_table(f"marts.{mart}")
                snapshot = table.current_snapshot()
                if snapshot is not None:
                    table.manage_snapshots().create_tag(snapshot.snapshot_id, tag).commit()
    print(f"a burst of late deliveries in {land_burst(settings, open_hour, now)}", flush=True)
    # Not run_pipeline: the open hour is no arrival-hour partition yet; the platform's own steps take it.
    print(f"ingesting, building and publishing the open hour {hour_key(open_hour)}", flush=True)
    publish_hours(settings, load_catalog(settings), [open_hour], root / "dbt_target")
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "img")
    parser.add_argument("--keep", type=Path, help="build the demo here and keep it (reused when already built)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dashboard-demo-") as scratch:
        root = args.keep.resolve() if args.keep else Path(scratch)
        settings = local_settings(root)
        if not (args.keep and (settings.landing_dir / "topics").exists()) and not build_demo(root):
            return 1
        print("serving the dashboard and opening its pages", flush=True)
        with served_dashboard(settings, free_port(), root / "dashboard.log") as base:
            seen = look_at_pages(base, args.out, root / "profile")
    for page in seen:
        shot = (
            page.screenshot.relative_to(PROJECT_ROOT)
            if page.screenshot.is_relative_to(PROJECT_ROOT)
            else page.screenshot
        )
        print(f"{shot}: {page.charts} charts, {page.errors} errors")
    return 0 if all(p.errors == 0 for p in seen) else 1


if __name__ == "__main__":
    raise SystemExit(main())
