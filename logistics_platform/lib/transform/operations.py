"""The operations marts' checks as queries over the dbt DuckDB: SLA breaches and delivery-time anomalies in the
windows and dates a run's arrival hours built, off-route episodes not alerted before (docs/internals/publish.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from logistics_platform.lib.transform.arrival_window import ArrivalWindow

SLA_CHECK = "sla_within_target"
ANOMALY_CHECK = "delivery_time_within_baseline"
OFF_ROUTE_CHECK = "couriers_on_route"
# WARN checks the alert sensor still sends, like ERROR checks.
ALERTING_WARN_CHECKS = (SLA_CHECK, ANOMALY_CHECK, OFF_ROUTE_CHECK)
SLA_MART = "fct_region_sla"
DAILY_MART = "fct_region_delivery_daily"
OFF_ROUTE_MART = "fct_courier_off_route"
# The off-route episodes and SLA breaches alerted so far: operator state in the dbt DuckDB (a rebuild copies the ops
# schema), so that a live run every few seconds over the open hour posts each once.
ALERTED_EPISODES = "ops.off_route_alerted"
ALERTED_BREACHES = "ops.sla_alerted"


@dataclass(frozen=True)
class Breach:
    window_start: datetime
    window_end: datetime
    region: str
    deliveries: int
    late_deliveries: int
    late_share: Decimal

    def describe(self) -> str:
        return (
            f"{self.region} {self.window_start:%Y-%m-%d %H:%M}-{self.window_end:%H:%M} UTC: "
            f"{self.late_deliveries}/{self.deliveries} late, share {self.late_share}"
        )


@dataclass(frozen=True)
class Anomaly:
    delivery_date: date
    region: str
    avg_delivery_minutes: float
    baseline_avg_minutes: float
    baseline_stddev_minutes: float

    def describe(self) -> str:
        return (
            f"{self.region} {self.delivery_date}: {self.avg_delivery_minutes:.1f} min on average against a baseline "
            f"of {self.baseline_avg_minutes:.1f} ± {self.baseline_stddev_minutes:.1f}"
        )


@dataclass(frozen=True)
class Episode:
    courier_id: int
    order_id: int
    started_at: datetime
    minutes: float
    max_distance_km: float
    region: str

    def describe(self) -> str:
        return (
            f"courier {self.courier_id} order {self.order_id} ({self.region}) off route from "
            f"{self.started_at:%Y-%m-%d %H:%M:%S} UTC: {self.minutes:.1f} min, up to {self.max_distance_km:.2f} km"
        )


def _arrival_filter(window: ArrivalWindow | None) -> tuple[str, list[Any]]:
    return ("true", []) if window is None else ("_arrival_hour between ? and ?", [window.first, window.last])


def breached_windows(con: Any, window_minutes: int, window: ArrivalWindow | None) -> list[Breach]:
    """Breached rows of marts.fct_region_sla in the windows built from the arrival hours of ``window`` (None: all)."""
    where, params = _arrival_filter(window)
    bucket = f"interval {int(window_minutes)} minute"
    rows = con.execute(
        f"""
        with built as (
            select time_bucket({bucket}, _event_time) as window_start from staging.stg_orders where {where}
            union
            select time_bucket({bucket}, delivered_at) from staging.stg_orders
            where {where} and delivered_at is not null
        )
        select sla.window_start, sla.region, sla.deliveries, sla.late_deliveries, sla.late_share
        from marts.{SLA_MART} as sla inner join built on sla.window_start = built.window_start
        where sla.breached order by sla.window_start, sla.region
        """,
        params * 2,
    ).fetchall()
    width = timedelta(minutes=window_minutes)
    return [Breach(w, w + width, region, n, late, share) for w, region, n, late, share in rows]


def new_breaches(con: Any, breaches: list[Breach], run_id: str) -> list[Breach]:
    """Of ``breaches``, the (window, region) pairs not posted before, recorded as posted in the same statement."""
    con.execute(
        f"create schema if not exists ops; create table if not exists {ALERTED_BREACHES} (window_start timestamp, "
        "region varchar, run_id varchar)"
    )
    if not breaches:
        return []
    rows = con.execute(
        f"""
        insert into {ALERTED_BREACHES}
        select b.window_start, b.region, ? from (select unnest(?) as window_start, unnest(?) as region) as b
        anti join {ALERTED_BREACHES} as s using (window_start, region)
        returning window_start, region
        """,
        [run_id, [b.window_start for b in breaches], [b.region for b in breaches]],
    ).fetchall()
    fresh = set(rows)
    return [b for b in breaches if (b.window_start, b.region) in fresh]


def anomalous_days(con: Any, window: ArrivalWindow | None) -> list[Anomaly]:
    """Anomalous rows of marts.fct_region_delivery_daily on the delivery dates built from the hours of ``window``."""
    where, params = _arrival_filter(window)
    rows = con.execute(
        f"""
        select delivery_date, region, avg_delivery_minutes, baseline_avg_minutes, baseline_stddev_minutes
        from marts.{DAILY_MART}
        where is_anomaly and delivery_date in (
            select distinct cast(delivered_at as date) from staging.stg_orders where {where}
            and delivered_at is not null
        )
        order by delivery_date, region
        """,
        params,
    ).fetchall()
    return [Anomaly(*row) for row in rows]


def new_off_route_episodes(con: Any, run_id: str) -> list[Episode]:
    """Episodes of the (courier, order) pairs the run rebuilt that overlap none alerted before, recorded as alerted in
    the same statement: each is reported once, however often later runs rebuild it as it grows."""
    con.execute(
        f"create schema if not exists ops; create table if not exists {ALERTED_EPISODES} (courier_id bigint, order_id"
        " bigint, started_at timestamp, minutes double, max_distance_km double, region varchar, last_off_at timestamp,"
        " run_id varchar)"
    )
    last_off = "e.started_at + to_microseconds(cast(round(e.minutes * 60e6) as bigint))"
    rows = con.execute(
        f"""
        insert into {ALERTED_EPISODES}
        select e.courier_id, e.order_id, e.started_at, e.minutes, e.max_distance_km, e.region, {last_off}, ?
        from marts.{OFF_ROUTE_MART} as e
        semi join intermediate.int_affected_off_route_pairs as a using (courier_id, order_id)
        anti join {ALERTED_EPISODES} as s on s.courier_id = e.courier_id and s.order_id = e.order_id
            and s.started_at <= {last_off} and e.started_at <= s.last_off_at
        returning courier_id, order_id, started_at, minutes, max_distance_km, region
        """,
        [run_id],
    ).fetchall()
    return sorted((Episode(*row) for row in rows), key=lambda e: (e.started_at, e.courier_id, e.order_id))


def _summary(head: str, items: list[Breach] | list[Anomaly] | list[Episode], limit: int) -> str | None:
    if not items:
        return None
    more = f"; and {len(items) - limit} more" if len(items) > limit else ""
    return f"{head}: " + "; ".join(i.describe() for i in items[:limit]) + more


def sla_summary(breaches: list[Breach], max_share: float, earlier: int = 0, limit: int = 10) -> str | None:
    """One line naming region, window and late share of each new breach (the first ``limit``), and how many breaches
    of the run's windows were posted before; None when there are neither."""
    if not breaches:
        return f"SLA breached in {earlier} window(s), all posted before" if earlier else None
    before = f" ({earlier} more posted before)" if earlier else ""
    head = f"SLA breached in {len(breaches)} new window(s){before}, late share above {max_share}"
    return _summary(head, breaches, limit)


def anomaly_summary(anomalies: list[Anomaly], limit: int = 10) -> str | None:
    """One line naming region and date of each anomalous day (the first ``limit``); None when none."""
    return _summary(f"Delivery time off its 7-day baseline (> 3 stddev) on {len(anomalies)} day(s)", anomalies, limit)


def off_route_summary(episodes: list[Episode], limit: int = 10) -> str | None:
    """One line naming courier, order, start, minutes and distance of each new episode (the first ``limit``)."""
    return _summary(f"{len(episodes)} new off-route episode(s)", episodes, limit)
