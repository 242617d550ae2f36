"""What the generator produces: period, seed, volumes, and a rate for every anomaly of docs/contract/sources.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from logistics_platform.generator.encode import CDC_REASONS
from logistics_platform.lib import contract
from logistics_platform.lib.timekeys import utc_naive

TABLES = tuple(contract.SOURCES)
DEFAULT_PARTITIONS = {"tenants": 1, "couriers": 1, "orders": 3, "payments": 3, "tracking_pings": 4}

# The rates of invalid lines, one per quarantine reason (extra corrupted copies of valid events).
INVALID_LINE_RATES = tuple(f"{reason}_rate" for reason in CDC_REASONS)
# Rates that make data "dirty" (not valid per the contract, or unusual encodings); zero in clean mode.
DIRTY_RATES = (
    *INVALID_LINE_RATES,
    *("schema_envelope_rate", "gzip_rate", "decimal_number_rate", "epoch_micros_rate"),
    *("precise_decimal_rate", "avro_file_rate"),
)
CLEAN: dict[str, Any] = {**{name: 0.0 for name in DIRTY_RATES}, "delayed_files": 0}
# What each rate (a probability per valid event, per file for gzip_rate) is: the CLI's help.
RATE_HELP = {
    "duplicate_rate": "redelivered copies of events (same hour or up to 6 h later)",
    "out_of_order_rate": "changes that land after the next change of their row",
    "late_within_rate": "events arriving 1..L hours after their event time (on time)",
    "late_beyond_rate": "events arriving more than L after their event time (late)",
    "delete_rate": "orders/couriers deleted (each delete followed by a tombstone)",
    "snapshot_rate": "orders open at the start, read by the snapshot (op r), x orders/day",
    "malformed_json_rate": "lines that are not JSON, truncated or not UTF-8",
    "invalid_op_rate": "envelopes without op or with an unknown op",
    "missing_key_rate": "rows without their key or with a key of the wrong type",
    "invalid_value_rate": "values that do not parse (bad decimal, bad timestamp, ...)",
    "invalid_envelope_rate": "envelopes without after / source.lsn / source.ts_ms",
    "schema_envelope_rate": "CDC lines in the schemas.enable=true form",
    "gzip_rate": "files written gzipped (Avro files: codec deflate)",
    "decimal_number_rate": "CDC lines with decimals as JSON numbers",
    "epoch_micros_rate": "CDC lines with timestamps as epoch microseconds",
    "precise_decimal_rate": "order/payment lines with decimals as Connect Decimal base64 (Debezium's default)",
    "avro_file_rate": "CDC topic-partition-hours landed as Avro container files (.avro)",
    "cancel_rate": "orders cancelled",
    "refund_rate": "delivered orders charged twice and refunded",
    "payment_mismatch_rate": "delivered orders whose payments do not add up",
    "failed_payment_rate": "orders whose first payment fails",
}


class GeneratorConfigError(ValueError):
    """A generator setting is out of range; the message names it and what it accepts."""


@dataclass(frozen=True)
class GeneratorConfig:
    """Period, seed, volumes and anomaly rates (``RATE_HELP``) of one generated landing zone."""

    start: datetime
    hours: int = 72
    seed: int = 42
    tenants: int = 8
    couriers: int = 150
    orders_per_day: int = 2400
    pings_per_day: int = 60_000
    partitions: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PARTITIONS))
    flush_size: int = 5000  # lines per landed file at most (Kafka Connect flush.size)
    allowed_lateness_hours: float = 2.0
    duplicate_rate: float = 0.02
    out_of_order_rate: float = 0.02
    late_within_rate: float = 0.02
    late_beyond_rate: float = 0.01
    delete_rate: float = 0.01
    snapshot_rate: float = 0.05
    malformed_json_rate: float = 0.002
    invalid_op_rate: float = 0.001
    missing_key_rate: float = 0.001
    invalid_value_rate: float = 0.002
    invalid_envelope_rate: float = 0.001
    schema_envelope_rate: float = 0.1
    gzip_rate: float = 0.3
    decimal_number_rate: float = 0.02
    epoch_micros_rate: float = 0.02
    precise_decimal_rate: float = 0.15
    avro_file_rate: float = 0.15  # per topic, arrival hour and partition
    delayed_files: int = 1  # files dropped into an already past hour folder
    delayed_file_hours: int = 3  # how long after their hour such a file shows up (mtime)
    tip_amount_from: float | None = 0.5  # fraction of the period after which orders carry tip_amount
    coordinates_from: float | None = 0.25  # fraction of the period after which new orders carry coordinates
    cancel_rate: float = 0.05
    refund_rate: float = 0.02
    payment_mismatch_rate: float = 0.01
    failed_payment_rate: float = 0.02
    tier_changes: int = 4  # tenant tier changes over the whole period
    noop_updates: int = 3  # tenant updates that change only updated_at

    def __post_init__(self) -> None:
        start = utc_naive(self.start)
        object.__setattr__(self, "start", start)
        if start != start.replace(minute=0, second=0, microsecond=0):
            raise GeneratorConfigError(f"start={start.isoformat()} must be on a full hour (UTC)")
        for name in ("hours", "tenants", "couriers", "flush_size", "delayed_file_hours"):
            if getattr(self, name) < 1:
                raise GeneratorConfigError(f"{name}={getattr(self, name)} must be at least 1")
        for name in ("orders_per_day", "pings_per_day", "delayed_files", "tier_changes", "noop_updates"):
            if getattr(self, name) < 0:
                raise GeneratorConfigError(f"{name}={getattr(self, name)} must not be negative")
        if self.allowed_lateness_hours < 0:
            raise GeneratorConfigError("allowed_lateness_hours must not be negative")
        for name in (f.name for f in fields(self) if f.name.endswith(("_rate", "_from"))):  # _from: None or a fraction
            if not 0.0 <= (getattr(self, name) or 0.0) <= 1.0:
                raise GeneratorConfigError(f"{name}={getattr(self, name)} must be between 0 and 1")
        parts = dict(DEFAULT_PARTITIONS)
        for table, n in self.partitions.items():
            if table not in parts:
                raise GeneratorConfigError(f"partitions: unknown table {table!r}; expected one of {', '.join(TABLES)}")
            if int(n) < 1:
                raise GeneratorConfigError(f"partitions[{table}]={n} must be at least 1")
            parts[table] = int(n)
        object.__setattr__(self, "partitions", parts)
        if self.malformed_total > 0.5:
            raise GeneratorConfigError("the five invalid-line rates add up to more than 0.5")
        if self.late_within_rate + self.late_beyond_rate > 1.0:
            raise GeneratorConfigError("late_within_rate + late_beyond_rate exceed 1 (an event is late only once)")
        if self.cancel_rate >= 0.95 and self.pings_per_day > 0:
            # Pings are spread over delivered trips: with (almost) none, one hour's pings outgrow an Arrow array.
            raise GeneratorConfigError(
                f"cancel_rate={self.cancel_rate} leaves no delivered trips to carry {self.pings_per_day} pings a day: "
                "use cancel_rate < 0.95 or pings_per_day=0"
            )

    @property
    def malformed_total(self) -> float:
        return sum(getattr(self, name) for name in INVALID_LINE_RATES)

    @classmethod
    def clean(cls, start: datetime, **overrides: Any) -> GeneratorConfig:
        """Valid data only: no invalid lines, one envelope form, plain files, canonical encodings (``CLEAN``);
        duplicates, late and out-of-order events, deletes and snapshots stay (they are valid data)."""
        return cls(start=start, **{**CLEAN, **overrides})

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form (recorded in ``_generation.json``)."""
        return {**dataclasses.asdict(self), "start": self.start.isoformat()}
