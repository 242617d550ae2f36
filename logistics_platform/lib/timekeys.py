"""Time encodings, written once (any layer may import it): hour and day partition keys (UTC), epoch micros."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

HOUR_KEY_FORMAT = "%Y-%m-%d-%H:%M"
DAY_KEY_FORMAT = "%Y-%m-%d"
_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)


def utc_naive(moment: datetime) -> datetime:
    """``moment`` as a naive UTC ``datetime`` (an aware value is converted, a naive one is taken as UTC)."""
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo is not None else moment


def hour_start(moment: datetime) -> datetime:
    """The naive-UTC start of the hour ``moment`` falls in."""
    return utc_naive(moment).replace(minute=0, second=0, microsecond=0)


def hour_key(moment: datetime) -> str:
    """Dagster hourly partition key (``YYYY-MM-DD-HH:MM``) of the hour ``moment`` falls in."""
    return f"{hour_start(moment):%Y-%m-%d-%H:%M}"


def parse_hour_key(key: str) -> datetime:
    """Arrival hour (naive UTC) of an hour key; a one-line ``ValueError`` names the expected form."""
    try:
        return datetime.strptime(key, HOUR_KEY_FORMAT)
    except ValueError:
        raise ValueError(f"partition key {key!r}: expected YYYY-MM-DD-HH:MM, e.g. 2026-11-01-05:00") from None


def day_key(moment: datetime) -> str:
    """Dagster daily partition key (``YYYY-MM-DD``, UTC) of the day ``moment`` falls in."""
    return f"{utc_naive(moment):%Y-%m-%d}"


def parse_day_key(key: str) -> datetime:
    """Start (naive UTC) of the day a daily partition key names; a one-line ``ValueError`` names the expected form."""
    try:
        return datetime.strptime(key, DAY_KEY_FORMAT)
    except ValueError:
        raise ValueError(f"day partition key {key!r}: expected YYYY-MM-DD, e.g. 2026-11-01") from None


def epoch_micros(moment: datetime) -> int:
    """Microseconds since 1970-01-01 UTC of a ``datetime`` (exact integer arithmetic, no float rounding)."""
    # An aware value is subtracted as it is: converting it to UTC first overflows at the ends of datetime's range.
    d = moment - (_EPOCH if moment.tzinfo is None else _EPOCH_UTC)
    return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds


def from_epoch_micros(micros: int) -> datetime:
    """The naive-UTC ``datetime`` of microseconds since 1970-01-01."""
    return _EPOCH + timedelta(microseconds=micros)
