"""A mart today (``main``) against the same mart N days ago, through the daily tags (``daily-YYYY-MM-DD``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.table import Table
from pyiceberg.table.refs import SnapshotRefType

from logistics_platform.lib.dashboard.reader import MartState
from logistics_platform.lib.maintenance.tags import PREFIX, tag_name


def travel_tag(today: date, days_ago: int) -> str:
    """The daily tag of the date ``days_ago`` days before ``today``."""
    return tag_name(today - timedelta(days=days_ago))


def daily_tags(table: Table) -> list[str]:
    """The table's daily tags, newest first."""
    refs = table.metadata.refs
    names = [n for n, r in refs.items() if r.snapshot_ref_type == SnapshotRefType.TAG and n.startswith(PREFIX)]
    return sorted(names, reverse=True)


def tag_snapshot(table: Table, tag: str) -> int | None:
    """The snapshot id ``tag`` points to, or None when the table has no such tag."""
    ref = table.metadata.refs.get(tag)
    return ref.snapshot_id if ref is not None and ref.snapshot_ref_type == SnapshotRefType.TAG else None


def missing_tag_message(mart: str, tag: str, available: list[str]) -> str:
    """One line for a comparison whose tag does not exist: what is there, and what makes tags."""
    have = f"its newest tags: {', '.join(available[:3])}" if available else "it has no daily tag yet"
    return (
        f"marts.{mart} has no tag {tag} ({have}): the nightly `logistics-platform maintain` tags each finished day, "
        "pick fewer days or run it once a day has ended"
    )


@dataclass(frozen=True)
class Comparison:
    """The measures of a mart in two states and, when it has a date or time column, its rows per day in each."""

    measures: pd.DataFrame  # measure, then, now, change
    day_column: str | None
    by_day: pd.DataFrame  # day, state ("then: <tag>" | "now"), rows


def measures(rows: pa.Table) -> dict[str, float]:
    """``rows`` -> {"rows": n, "sum(col)": ..., "count(flag)": ...} over its numeric and boolean columns."""
    out: dict[str, float] = {"rows": float(rows.num_rows)}
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        kind = column.type
        numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
        if pa.types.is_boolean(kind):
            out[f"count({name})"] = float(pc.sum(pc.cast(column, pa.int64())).as_py() or 0)
        elif numeric and not name.endswith(("_id", "_lsn")):  # sums of identifiers and log positions mean nothing
            out[f"sum({name})"] = float(pc.sum(pc.cast(column, pa.float64())).as_py() or 0.0)
    return out


def day_column(schema: pa.Schema) -> str | None:
    """The first date or timestamp column of a mart (what its rows are counted per day by)."""
    for f in schema:
        if pa.types.is_date(f.type) or pa.types.is_timestamp(f.type):
            return f.name
    return None


def rows_per_day(rows: pa.Table, column: str) -> pd.DataFrame:
    """Rows per UTC date of ``column`` (day, rows)."""
    frame = rows.select([column]).to_pandas()
    days = pd.to_datetime(frame[column]).dt.normalize()
    counted = days.value_counts().sort_index()
    return pd.DataFrame({"day": counted.index, "rows": counted.to_numpy()})


def compare(tag: str, then: MartState, now: MartState) -> Comparison:
    """Two states of a mart side by side, ``then`` the one of ``tag``."""
    before, after = measures(then.rows), measures(now.rows)
    names = list(dict.fromkeys([*after, *before]))
    then_values, now_values = [before.get(n, 0.0) for n in names], [after.get(n, 0.0) for n in names]
    frame = pd.DataFrame({"measure": names, "then": then_values, "now": now_values})
    frame["change"] = frame["now"] - frame["then"]
    column = day_column(now.rows.schema)
    states = ((f"then: {tag}", then), ("now", now))
    parts = [
        rows_per_day(s.rows, column).assign(state=label)
        for label, s in states
        if column is not None and column in s.rows.column_names
    ]
    by_day = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["day", "rows", "state"])
    return Comparison(frame, column, by_day)
