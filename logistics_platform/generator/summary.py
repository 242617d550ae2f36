"""The ground truth: per-topic counters filled in as lines are made, and the ``_generation.json`` built from them."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from logistics_platform.generator import encode as E
from logistics_platform.generator.config import TABLES, GeneratorConfig
from logistics_platform.generator.model import T_PINGS, TOPICS, Period
from logistics_platform.lib.timekeys import from_epoch_micros

# Slots of TopicStats.hour(a): what landed in arrival hour a.
LINES, QUARANTINED, TOMBSTONES, LATE, FILES = range(5)


class TopicStats:
    """Counters of one topic; what ``_generation.json`` reports."""

    def __init__(self) -> None:
        self.events = 0  # distinct valid events (not counting redelivered copies)
        self.ops = {"c": 0, "u": 0, "d": 0, "r": 0}
        self.duplicates = 0
        self.late_within_injected = 0
        self.late_beyond_injected = 0
        self.out_of_order_injected = 0
        self.out_of_order_lines = 0
        self.schema_envelopes = 0
        self.decimal_numbers = 0
        self.epoch_micros = 0
        self.precise_decimals = 0  # lines with Connect Decimal base64 decimals (in JSON files)
        self.tip_amount_events = 0
        self.quarantine: dict[str, int] = {}
        # arrival hour index -> [lines, quarantined, tombstones, late lines, files] (slots LINES ... FILES)
        self.per_hour: defaultdict[int, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])

    def hour(self, a: int) -> list[int]:
        """The counters of arrival hour ``a`` (created on first use)."""
        return self.per_hour[a]

    def quarantined(self, a: int, reason: str) -> None:
        """Count a corrupted line landing in arrival hour ``a`` that the ingest must quarantine for ``reason``."""
        self.hour(a)[QUARANTINED] += 1
        self.quarantine[reason] = self.quarantine.get(reason, 0) + 1


def order_truth(final: dict[int, tuple[str, int, bool]]) -> dict[str, Any]:
    """Orders planned, still existing, deleted and delivered at the end, and the delivered orders' revenue, from
    ``final``: order id -> (status of its last change inside the period, total in cents, deleted)."""
    delivered = [v for v in final.values() if v[0] == "delivered" and not v[2]]
    return {
        "orders_planned": len(final),
        "orders_existing": sum(1 for v in final.values() if not v[2]),
        "orders_deleted": sum(1 for v in final.values() if v[2]),
        "orders_delivered": len(delivered),
        "gross_revenue_delivered": E.dec_num(sum(v[1] for v in delivered)),
    }


def _file_counts(files: list[dict[str, Any]]) -> dict[str, int]:
    gzip, avro = sum(1 for f in files if f["gz"]), sum(1 for f in files if f.get("avro"))
    return {"files": len(files), "gzip_files": gzip, "avro_files": avro, "bytes": sum(f["bytes"] for f in files)}


# the TopicStats counters a topic's summary reports as they are, in its order
_COUNTERS = (
    *("late_beyond_injected", "late_within_injected", "out_of_order_injected", "out_of_order_lines"),
    *("schema_envelopes", "decimal_numbers", "epoch_micros", "precise_decimals", "tip_amount_events"),
)


def _topic_summary(st: TopicStats, ti: int, files: list[dict[str, Any]], partitions: int) -> dict[str, Any]:
    lines, quarantined, tombstones, late, _ = (sum(slot) for slot in zip([0] * 5, *st.per_hour.values(), strict=True))
    return {
        "table": TABLES[ti],
        "lines": lines,
        "rows": lines - quarantined - tombstones,
        **_file_counts([f for f in files if f["topic"] == ti]),
        "partitions": partitions,
        "events": st.events,
        "ops": dict(st.ops) if ti != T_PINGS else {},
        "duplicates": st.duplicates,
        "tombstones": tombstones,
        "late_lines": late,
        **{name: getattr(st, name) for name in _COUNTERS},
        "quarantined": quarantined,
        "quarantine": dict(sorted(st.quarantine.items())),
    }


def _hours_summary(st: TopicStats, period: Period) -> dict[str, Any]:
    return {
        from_epoch_micros(period.hour_start(a)).strftime("%Y-%m-%dT%H"): {
            "lines": v[LINES],
            "rows": v[LINES] - v[QUARANTINED] - v[TOMBSTONES],
            "quarantined": v[QUARANTINED],
            "tombstones": v[TOMBSTONES],
            "late": v[LATE],
            "files": v[FILES],
        }
        for a, v in sorted(st.per_hour.items())
    }


# the per-topic counts whose totals are their sums, in the summary's order
_SUMMED = ("tombstones", "quarantined", "duplicates", "late_lines", "out_of_order_lines", "schema_envelopes")


def build_summary(
    cfg: GeneratorConfig,
    period: Period,
    stats: list[TopicStats],
    files: list[dict[str, Any]],
    delayed_files: list[dict[str, Any]],
    truth: dict[str, Any],
) -> dict[str, Any]:
    """The ``_generation.json`` content: config, period, totals, per-topic and per-hour counts, ground truth (the
    world's counts); ``files``: one ``{"topic", "gz", "bytes"}`` record (and ``"avro": codec``) per landed file."""
    topics = {TOPICS[t]: _topic_summary(stats[ti], ti, files, cfg.partitions[t]) for ti, t in enumerate(TABLES)}
    quarantine_total: Counter[str] = Counter()
    for t in topics.values():
        for reason, n in t["quarantine"].items():
            quarantine_total[reason.split(":")[0]] += n
    return {
        "generator": "logistics_platform.generator",
        "format_version": 1,
        "config": cfg.to_json(),
        "period": {
            "start": cfg.start.isoformat(),
            "end": from_epoch_micros(period.end_us).isoformat(),
            "hours": cfg.hours,
        },
        "allowed_lateness_hours": cfg.allowed_lateness_hours,
        "tip_amount_from": None if period.tip_from_us is None else from_epoch_micros(period.tip_from_us).isoformat(),
        "totals": {
            "lines": sum(t["lines"] for t in topics.values()),
            **_file_counts(files),
            **{k: sum(t[k] for t in topics.values()) for k in _SUMMED},
            "quarantine": dict(sorted(quarantine_total.items())),
        },
        "delayed_files": delayed_files,
        "topics": topics,
        "per_hour": {TOPICS[t]: _hours_summary(stats[ti], period) for ti, t in enumerate(TABLES)},
        "truth": truth,
    }
