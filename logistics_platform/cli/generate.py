"""`generate`: write a landing zone of CDC events and pings (docs/contract/sources.md) for a period, from a seed."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from pathlib import Path

from logistics_platform.generator.config import CLEAN, RATE_HELP, GeneratorConfig
from logistics_platform.lib.timekeys import HOUR_KEY_FORMAT

DEFAULT_DAYS = 3

VOLUMES = ("tenants", "couriers", "orders_per_day", "pings_per_day", "flush_size")
RATES = "anomaly rates (0..1)"
_D = {f.name: f.default for f in fields(GeneratorConfig)}
COORDS = f"fraction of the period from which new orders carry coordinates (1 = never; default {_D['coordinates_from']})"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


HELP = "write a deterministic landing zone (Debezium CDC + pings) with configurable anomalies"
DESCRIPTION = (
    "Write <out>/topics/<topic>/dt=/hr=/ files as a Kafka Connect sink would, plus <out>/_generation.json with what "
    "was generated. Same arguments and seed -> identical files."
)
ARGS: dict[str, dict[str, object]] = {
    "--out": {"type": Path, "help": "landing directory (default: the LANDING_DIR setting)"},
    "--start": {"help": "first hour's date, YYYY-MM-DD or YYYY-MM-DDTHH (UTC; default: 3 days ago)"},
    "--days": {"type": int, "default": DEFAULT_DAYS, "help": f"days to generate (default {DEFAULT_DAYS})"},
    "--hours": {"type": int, "help": "hours to generate (overrides --days)"},
    "--seed": {"type": int, "default": 42, "help": "random seed (default 42)"},
    **{_flag(n): {"type": int, "default": _D[n], "help": f"default {_D[n]}", "group": "volumes"} for n in VOLUMES},
    "--partitions": {
        "default": "",
        "help": "Kafka partitions per table, e.g. orders=6,tracking_pings=8 (default tenants=1,couriers=1,"
        "orders=3,payments=3,tracking_pings=4)",
        "group": "volumes",
    },
    "--allowed-lateness-hours": {
        "type": float,
        "help": "L (default: the ALLOWED_LATENESS_HOURS setting)",
        "group": "volumes",
    },
    **{
        _flag(n): {"type": float, "default": _D[n], "help": f"{text} (default {_D[n]})", "group": RATES}
        for n, text in RATE_HELP.items()
    },
    "--delayed-files": {"type": int, "default": _D["delayed_files"], "help": "files dropped late", "group": RATES},
    "--tip-amount-from": {
        "type": float,
        "default": _D["tip_amount_from"],
        "help": "fraction of the period after which orders carry the new tip_amount column (1 = never)",
        "group": RATES,
    },
    "--coordinates-from": {"type": float, "default": _D["coordinates_from"], "help": COORDS, "group": RATES},
    "--clean": {"action": "store_true", "help": "valid data only: no invalid lines, one envelope form, plain files"},
    "--if-absent": {"action": "store_true", "help": "do nothing when the directory already has topics/"},
    "--quiet": {"action": "store_true", "help": "no progress bar"},
}


def _parse_start(text: str | None, today: datetime, earliest: datetime) -> datetime:
    if text is None:
        # The demo looks live: the period ends today at 00:00 UTC, but never starts before the first partition.
        return max(today - timedelta(days=DEFAULT_DAYS), earliest)
    for fmt in ("%Y-%m-%d", "%Y-%m-%dT%H", "%Y-%m-%dT%H:%M", HOUR_KEY_FORMAT):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise SystemExit(f"generate: --start {text!r} is not a date; use YYYY-MM-DD or YYYY-MM-DDTHH (UTC)")


def _parse_partitions(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        table, _, n = item.partition("=")
        try:
            out[table.strip()] = int(n)
        except ValueError:
            raise SystemExit(f"generate: --partitions item {item!r} must look like orders=6") from None
    return out


def run(args: argparse.Namespace) -> int:
    from logistics_platform.generator import GeneratorConfigError, generate
    from logistics_platform.settings import load_settings

    settings = load_settings()
    out: Path = args.out or settings.landing_dir
    topics = out / "topics"
    if args.if_absent and topics.is_dir() and any(topics.iterdir()):
        print(f"generate: {topics} already has data; nothing to do (--if-absent)")
        return 0
    today = datetime.now(UTC).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0)
    start = _parse_start(args.start, today, settings.partitions_start_datetime)
    hours = args.hours if args.hours is not None else args.days * 24
    values = {name: getattr(args, name) for name in (*RATE_HELP, *VOLUMES, "delayed_files")}
    values["tip_amount_from"] = None if args.tip_amount_from >= 1 else args.tip_amount_from
    values["coordinates_from"] = None if args.coordinates_from == 1 else args.coordinates_from
    values["partitions"] = _parse_partitions(args.partitions)
    values["allowed_lateness_hours"] = (
        args.allowed_lateness_hours if args.allowed_lateness_hours is not None else settings.allowed_lateness_hours
    )
    if args.clean:
        values.update(CLEAN)
    t0 = time.perf_counter()
    try:
        config = GeneratorConfig(start=start, hours=hours, seed=args.seed, **values)
        summary = generate(out, config, progress=not args.quiet and sys.stderr.isatty())
    except (GeneratorConfigError, FileExistsError) as e:
        print(f"generate: {e}", file=sys.stderr)
        return 2 if isinstance(e, GeneratorConfigError) else 1
    elapsed = max(time.perf_counter() - t0, 1e-9)
    print(format_summary(summary, out, elapsed))
    return 0


def format_summary(summary: dict, out: Path, elapsed: float) -> str:
    """A short human summary: lines per topic, anomalies, throughput."""
    tot = summary["totals"]
    period = summary["period"]
    lines = [
        f"generated {tot['lines']:,} lines in {tot['files']:,} files ({tot['bytes'] / 1e6:,.1f} MB) into {out}",
        f"period {period['start']} .. {period['end']} ({period['hours']} h), L = {summary['allowed_lateness_hours']} h",
    ]
    for topic, t in summary["topics"].items():
        lines.append(
            f"  {topic:<26} {t['lines']:>10,} lines  {t['files']:>5} files  dup {t['duplicates']:,}  "
            f"late {t['late_lines']:,}  out-of-order {t['out_of_order_lines']:,}  "
            f"tombstones {t['tombstones']:,}  quarantine {t['quarantined']:,}"
        )
    lines.append(f"quarantine expected: {', '.join(f'{k} {v:,}' for k, v in tot['quarantine'].items()) or 'none'}")
    lines.append(
        f"schema/payload lines {tot['schema_envelopes']:,}, gzip files {tot['gzip_files']:,}, "
        f"delayed files {len(summary['delayed_files'])}, tip_amount from {summary['tip_amount_from'] or 'never'}"
    )
    lines.append(f"{tot['lines'] / elapsed:,.0f} lines/s, {tot['bytes'] / elapsed / 1e6:,.1f} MB/s ({elapsed:.1f} s)")
    return "\n".join(lines)
