"""What every part of the generator shares: time units, topics, the period, the shape of a change, the random source."""

from __future__ import annotations

from dataclasses import dataclass
from random import Random
from typing import Any

from logistics_platform.generator import encode as E
from logistics_platform.generator.config import GeneratorConfig
from logistics_platform.lib import contract
from logistics_platform.lib.timekeys import epoch_micros

SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR_US = E.HOUR_US
TOPICS = {table: source.topic for table, source in contract.SOURCES.items()}
# Topic indices, in the order of config.TABLES (lists indexed by them are cheaper than dicts in the hot loops).
T_TENANTS, T_COURIERS, T_ORDERS, T_PAYMENTS, T_PINGS = range(5)
KEYS = tuple(source.key for source in contract.SOURCES.values())

# A change is a list, built by the million and completed later: the commit time of its row's next change goes into
# slot NEXT_COMMIT once that change is planned (out-of-order delivery needs it).
#   [topic index, op, key, before (JSON text), after (JSON text), next commit (us) or None, encoding flags]
Change = list[Any]
NEXT_COMMIT = 5
# Encoding flags of a change: timestamps as epoch microseconds, decimals as JSON numbers, orders row with tip_amount,
# decimals as Connect Decimal base64 (Debezium's default decimal.handling.mode=precise), orders row with coordinates.
# (flags >> 2) & 7 (bits: tip_amount, precise decimals, coordinates) indexes the JsonConverter schema a change needs.
EPOCH_MICROS, DECIMAL_NUMBERS, WITH_TIP, PRECISE, WITH_COORDINATES = 1, 2, 4, 8, 16


# A CDC line as the layout files it: (arrival time, text, row key or None, LSN, lines: 2 for a delete + tombstone).
Record = tuple[int, str, Any, int, int]
# A landed file: its content (Avro: its records) or a function making it, lines, last arrival time, Avro writer schema
Piece = tuple[Any, int, int, dict[str, Any] | None]
# (commit time, changes, read by the connector's snapshot)
Transaction = tuple[int, list[Change], bool]


@dataclass(frozen=True)
class Period:
    """The generated period in epoch microseconds, the allowed lateness L and when ``tip_amount`` appears."""

    start_us: int
    end_us: int
    hours: int
    late_us: int
    tip_from_us: int | None
    coordinates_from_us: int | None

    @classmethod
    def of(cls, cfg: GeneratorConfig) -> Period:
        """The period of a config."""
        start_us, tip, xy = epoch_micros(cfg.start), cfg.tip_amount_from, cfg.coordinates_from
        tip_from_us = None if tip is None or tip >= 1.0 else start_us + int(tip * cfg.hours * 3600) * SECOND
        xy_from_us = None if xy is None or xy >= 1.0 else start_us + int(xy * cfg.hours * 3600) * SECOND
        late_us = round(cfg.allowed_lateness_hours * 3600) * SECOND
        return cls(start_us, start_us + cfg.hours * HOUR_US, cfg.hours, late_us, tip_from_us, xy_from_us)

    def hour_of(self, us: int) -> int:
        """Index (from 0) of the hour of the period that ``us`` falls in."""
        return (us - self.start_us) // HOUR_US

    def hour_start(self, index: int) -> int:
        """Epoch microseconds of the start of hour ``index`` of the period."""
        return self.start_us + index * HOUR_US


def link(changes_by_row: dict[Any, Change], change: Change, commit_us: int) -> None:
    """Record ``commit_us`` as the next commit of the row's previous change, and ``change`` as its latest."""
    key = (change[0], change[2])
    prev = changes_by_row.get(key)
    if prev is not None:
        prev[NEXT_COMMIT] = commit_us
    changes_by_row[key] = change


class FastRandom(Random):
    """``random.Random`` whose ``randrange`` (so ``randint`` too) is floor(random() * n) (internals/generator.md)."""

    def randrange(self, start: int, stop: int | None = None, step: int = 1) -> int:  # type: ignore[override]
        """An int in [start, stop) (or [0, start)); ``step`` is not supported."""
        if stop is None:
            return int(self.random() * start)
        return start + int(self.random() * (stop - start))
