"""How a setting is declared and read: the :class:`Setting` record, the field helpers and the parsers of raw values.

A ``Settings`` field is declared once with :func:`setting` (or :func:`setting_map` for a group of variables that
forms one mapping): variable name, default as it would be written in the environment, meaning, parser, and whether
the dbt process gets it. Everything else (the field's typed default, ``load_settings``, the dbt environment, the
settings table of docs/settings.md) is derived from that. Nothing here reads the environment: ``settings.py``
hands the parsers its strings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logistics_platform.lib.timekeys import parse_hour_key

PROJECT_ROOT = Path(__file__).resolve().parents[1]
ENVIRONMENTS = ("local", "prod")
# Where a field's declarations are kept in its metadata.
DECLARATIONS = "settings"


class SettingsError(ValueError):
    """A configuration value is invalid; the message names the variable and what it accepts."""


@dataclass(frozen=True)
class Source:
    """Where a raw value comes from: the base of relative paths, the environment being loaded, and if it is a default.

    Defaults are written relative to the project (they keep every file inside it); values from the environment are
    taken from the working directory.
    """

    base: Path
    mode: str
    unset: bool


Parser = Callable[[str, "Setting", Source], Any]


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, default (as written in the environment; "" = unset) and how it is read."""

    name: str
    default: str
    doc: str
    parse: Parser
    dbt: bool = False  # the dbt process gets it (profiles.yml, the macros and the dbt-duckdb plugin read it)
    shown: str = ""  # docs/settings.md's default when ``default`` does not say it (computed, or by a library)
    key: str = ""  # its key in the mapping of a setting_map field

    @property
    def shown_default(self) -> str:
        """The default as docs/settings.md shows it."""
        return self.shown or self.default or "(unset)"

    def read(self, raw: str | None, source: Source) -> Any:
        """The value of ``raw`` (None or "" = unset: the default is read instead, relative to the project)."""
        if raw:
            return self.parse(raw, self, source)
        return self.parse(self.default, self, Source(PROJECT_ROOT, source.mode, unset=True))


DEFAULTS = Source(PROJECT_ROOT, "local", unset=True)


def setting(name: str, default: str, doc: str, parse: Parser, *, dbt: bool = False, shown: str = "") -> Any:
    """A ``Settings`` field read from the variable ``name``; its default is ``default`` read like a value of it."""
    declared = Setting(name, default, doc, parse, dbt, shown)
    return field(default=declared.read(None, DEFAULTS), metadata={DECLARATIONS: (declared,)})


def setting_map(*declared: Setting) -> Any:
    """A ``Settings`` field mapping each declaration's ``key`` to its variable's value, for the variables set."""
    assert all(d.key and not d.default for d in declared), "setting_map members have a key and no default"
    return field(default_factory=dict, metadata={DECLARATIONS: declared})


# ---------------------------------------------------------------------------------------------------- parsers
def text(raw: str, s: Setting, source: Source) -> str:
    """The value as it is."""
    return raw


def optional_text(raw: str, s: Setting, source: Source) -> str | None:
    """The value, None when unset."""
    return raw or None


def path(raw: str, s: Setting, source: Source) -> Path:
    """A path; a relative one is taken from the source's base."""
    p = Path(raw).expanduser()
    return p if p.is_absolute() else (source.base / p).resolve()


def optional_path(raw: str, s: Setting, source: Source) -> Path | None:
    """A path, None when unset."""
    return path(raw, s, source) if raw else None


def _number(raw: str, s: Setting, kind: type[int] | type[float]) -> Any:
    try:
        value = kind(raw)
    except ValueError:
        raise SettingsError(f"{s.name}={raw!r} is not a {kind.__name__}; unset it to use {kind(s.default)}") from None
    if value < 0:
        raise SettingsError(f"{s.name}={raw!r} must not be negative")
    return value


def count(raw: str, s: Setting, source: Source) -> int:
    """A non-negative integer."""
    return int(_number(raw, s, int))


def at_least_one(raw: str, s: Setting, source: Source) -> int:
    """A non-negative integer, 0 taken as 1."""
    return max(1, count(raw, s, source))


def amount(raw: str, s: Setting, source: Source) -> float:
    """A non-negative number."""
    return float(_number(raw, s, float))


def share(raw: str, s: Setting, source: Source) -> float:
    """A non-negative number, at most 1 (a larger one is taken as 1)."""
    return min(1.0, amount(raw, s, source))


def threads(raw: str, s: Setting, source: Source) -> int:
    """A number of threads: a positive integer."""
    value = count(raw, s, source)
    if value == 0:
        raise SettingsError(f"{s.name}=0: at least 1 thread; unset it to use {s.default}")
    return value


def port(raw: str, s: Setting, source: Source) -> int:
    """A TCP port."""
    value = count(raw, s, source)
    if not 0 < value < 65536:
        raise SettingsError(f"{s.name}={value}: a TCP port is between 1 and 65535; unset it to use {s.default}")
    return value


def minutes_dividing_an_hour(raw: str, s: Setting, source: Source) -> int:
    """Minutes that divide 60: SLA windows are aligned to the hour."""
    minutes = count(raw, s, source)
    if minutes == 0 or 60 % minutes:
        raise SettingsError(
            f"{s.name}={minutes}: SLA windows are aligned to the hour, use a divisor of 60 (1, 2, 3, 4, 5, "
            "6, 10, 12, 15, 20, 30, 60)"
        )
    return minutes


def choice(*allowed: str) -> Parser:
    """A parser of one of ``allowed`` (case-insensitive; blank = the default)."""

    def parse(raw: str, s: Setting, source: Source) -> str:
        value = raw.strip().lower() or s.default
        if value not in allowed:
            raise SettingsError(f"{s.name}={value!r}: expected one of {', '.join(allowed)}")
        return value

    return parse


def is_running(raw: str, s: Setting, source: Source) -> bool:
    """``running`` or ``stopped``, as whether automation starts running."""
    return choice("running", "stopped")(raw, s, source) == "running"


def hour_key(raw: str, s: Setting, source: Source) -> str:
    """A Dagster hourly partition key, kept as written."""
    try:
        parse_hour_key(raw)
    except ValueError:
        raise SettingsError(f"{s.name}={raw!r}: expected YYYY-MM-DD-HH:MM, e.g. 2026-11-01-00:00") from None
    return raw


def identifier(raw: str, s: Setting, source: Source) -> str:
    """A plain identifier: Spark and Flink take the catalog name as a configuration key (spark.sql.catalog.<name>)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", raw):
        raise SettingsError(
            f"{s.name}={raw!r}: expected a plain identifier (letters, digits, underscores), "
            "the name Spark/Trino/Flink JDBC catalogs are configured with"
        )
    return raw


def catalog_uri(raw: str, s: Setting, source: Source) -> str:
    """The SQL catalog's SQLAlchemy URI; the default's SQLite file is inside the project, and prod needs PostgreSQL."""
    if source.unset and raw.startswith("sqlite:///"):
        raw = f"sqlite:///{path(raw[len('sqlite:///') :], s, source)}"
    if source.mode == "prod" and raw.startswith("sqlite"):
        raise SettingsError(
            f"LOGISTICS_ENV=prod needs {s.name} on PostgreSQL "
            "(postgresql+psycopg2://user@host:5432/db); the SQLite catalog does not take parallel writers"
        )
    return raw


def warehouse(raw: str, s: Setting, source: Source) -> str:
    """The warehouse root URI; ``file://relative/path`` is resolved like every other relative path."""
    if raw.startswith("file://") and not raw.startswith("file:///"):
        return f"file://{path(raw[len('file://') :], s, source)}"
    return raw


def dbt_target(raw: str, s: Setting, source: Source) -> str:
    """The dbt target: as set, else the one named after the environment (``local`` or ``prod``)."""
    return raw or source.mode
