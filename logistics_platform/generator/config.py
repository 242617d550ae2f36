"""What the generator produces: period, seed, volumes, and a rate for every anomaly of docs/contract/sources.md."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from logistics_platform.lib import contract

TABLES = tuple(contract.SOURCES)
DEFAULT_PARTITIONS = {"tenants": 1, "couriers": 1, "orders": 3, "payments": 3, "tracking_pings": 4}

# Rates that make data "dirty" (not valid per the contract, or unusual encodings); zero in clean mode.
DIRTY_RATES = (
    "malformed_json_rate",
    "invalid_op_rate",
    "missing_key_rate",
    "invalid_value_rate",
    "invalid_envelope_rate",
    "schema_envelope_rate",
    "gzip_rate",
    "decimal_number_rate",
    "epoch_micros_rate",
    "precise_decimal_rate",
    "avro_file_rate",
)


class GeneratorConfigError(ValueError):
    """A generator setting is out of range; the message names it and what it accepts."""


@dataclass(frozen=True)
class GeneratorConfig:
    """Period, seed, volumes and anomaly rates of one generated landing zone.

    Rates are probabilities per valid event (per file for ``gzip_rate``) unless noted.
    """

    start: datetime
    hours: int = 72
    seed: int = 42
    # -- volumes
    tenants: int = 8
    couriers: int = 150
    orders_per_day: int = 2400
    pings_per_day: int = 60_000
    partitions: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PARTITIONS))
    flush_size: int = 5000  # lines per landed file at most (Kafka Connect flush.size)
    allowed_lateness_hours: float = 2.0
    # -- valid-data anomalies
    duplicate_rate: float = 0.02  # redelivered copy of an event, same hour or up to 6 hours later
    out_of_order_rate: float = 0.02  # change that lands after the next change of its row
    late_within_rate: float = 0.02  # arrives 1..L hours after its event time (not flagged late)
    late_beyond_rate: float = 0.01  # arrives more than L after its event time (flagged late)
    delete_rate: float = 0.01  # orders (with their payments) and couriers deleted, each followed by a tombstone
    snapshot_rate: float = 0.05  # orders open at the start, read by the connector snapshot (op r), x orders/day
    # -- invalid lines, one rate per quarantine reason (extra corrupted copies of valid events)
    malformed_json_rate: float = 0.002
    invalid_op_rate: float = 0.001
    missing_key_rate: float = 0.001
    invalid_value_rate: float = 0.002
    invalid_envelope_rate: float = 0.001
    # -- encodings and files
    schema_envelope_rate: float = 0.1  # CDC lines written with schemas.enable=true (schema/payload)
    gzip_rate: float = 0.3  # files written gzipped
    decimal_number_rate: float = 0.02  # CDC lines whose decimals are JSON numbers
    epoch_micros_rate: float = 0.02  # CDC lines whose timestamps are epoch microseconds
    # CDC lines (orders, payments) whose decimals are Connect Decimal base64 (decimal.handling.mode=precise)
    precise_decimal_rate: float = 0.15
    # CDC files written as Avro container files (per topic, arrival hour and partition; deflate at gzip_rate)
    avro_file_rate: float = 0.15
    delayed_files: int = 1  # files dropped into an already past hour folder
    delayed_file_hours: int = 3  # how long after their hour such a file shows up (mtime)
    tip_amount_from: float | None = 0.5  # fraction of the period after which orders carry tip_amount
    # -- business mix
    cancel_rate: float = 0.05
    refund_rate: float = 0.02  # double charge then refund: still reconciles
    payment_mismatch_rate: float = 0.01  # captured - refunded != total_amount
    failed_payment_rate: float = 0.02  # first payment fails, a second one is authorized
    tier_changes: int = 4  # tenant tier changes over the whole period
    noop_updates: int = 3  # tenant updates that change only updated_at

    def __post_init__(self) -> None:
        start = self.start
        if start.tzinfo is not None:
            start = start.astimezone(UTC).replace(tzinfo=None)
            object.__setattr__(self, "start", start)
        if start != start.replace(minute=0, second=0, microsecond=0):
            raise GeneratorConfigError(f"start={start.isoformat()} must be on a full hour (UTC)")
        if self.hours < 1:
            raise GeneratorConfigError(f"hours={self.hours} must be at least 1")
        for name in ("tenants", "couriers", "flush_size"):
            if getattr(self, name) < 1:
                raise GeneratorConfigError(f"{name}={getattr(self, name)} must be at least 1")
        for name in ("orders_per_day", "pings_per_day", "delayed_files", "tier_changes", "noop_updates"):
            if getattr(self, name) < 0:
                raise GeneratorConfigError(f"{name}={getattr(self, name)} must not be negative")
        if self.delayed_file_hours < 1:
            raise GeneratorConfigError(f"delayed_file_hours={self.delayed_file_hours} must be at least 1")
        if self.allowed_lateness_hours < 0:
            raise GeneratorConfigError("allowed_lateness_hours must not be negative")
        for f in fields(self):
            if f.name.endswith("_rate"):
                v = getattr(self, f.name)
                if not 0.0 <= v <= 1.0:
                    raise GeneratorConfigError(f"{f.name}={v} must be between 0 and 1")
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
        if self.tip_amount_from is not None and not 0.0 <= self.tip_amount_from <= 1.0:
            raise GeneratorConfigError("tip_amount_from must be a fraction of the period between 0 and 1, or None")

    @property
    def malformed_total(self) -> float:
        return (
            self.malformed_json_rate
            + self.invalid_op_rate
            + self.missing_key_rate
            + self.invalid_value_rate
            + self.invalid_envelope_rate
        )

    @classmethod
    def clean(cls, start: datetime, **overrides: Any) -> GeneratorConfig:
        """Valid data only: no invalid lines, one envelope form, plain files, canonical encodings.

        Duplicates, late and out-of-order events, deletes and snapshots stay (they are valid data); pass
        their rates in ``overrides`` to change them.
        """
        values: dict[str, Any] = {name: 0.0 for name in DIRTY_RATES}
        values["delayed_files"] = 0
        values.update(overrides)
        return cls(start=start, **values)

    def with_changes(self, **changes: Any) -> GeneratorConfig:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able form (recorded in ``_generation.json``)."""
        out = dataclasses.asdict(self)
        out["start"] = self.start.isoformat()
        return out
