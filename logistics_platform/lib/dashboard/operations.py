"""The operations pages' frames (pandas, decimals as floats): delivery time against its baseline, revenue by tier."""

from __future__ import annotations

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

ANOMALY_SIGMAS = 3.0  # a delivery day is anomalous beyond this many baseline standard deviations (marts.md)


def to_frame(table: pa.Table) -> pd.DataFrame:
    """``table`` as pandas, decimal columns as float64 (charts and arithmetic want floats)."""
    columns = [pc.cast(c, pa.float64()) if pa.types.is_decimal(c.type) else c for c in table.columns]
    return pa.table(columns, names=table.column_names).to_pandas()


def delivery_view(daily: pa.Table) -> pd.DataFrame:
    """fct_region_delivery_daily by region and date, with the band the anomaly rule allows (baseline +- 3 sigma)."""
    frame = to_frame(daily).sort_values(["region", "delivery_date"]).reset_index(drop=True)
    spread = ANOMALY_SIGMAS * frame["baseline_stddev_minutes"]
    frame["band_low"] = frame["baseline_avg_minutes"] - spread
    frame["band_high"] = frame["baseline_avg_minutes"] + spread
    return frame


def revenue_by_tier(revenue: pa.Table, tenants: pa.Table) -> pd.DataFrame:
    """fct_daily_revenue with the tenant's name and tier, taken from the dim_tenant version current at the end of
    the revenue date (the platform fee itself uses the tier at each delivery; a day with a tier change is shown under
    its closing tier)."""
    with duckdb.connect() as con:
        con.register("revenue", revenue)
        con.register("tenants", tenants)
        table = con.sql(
            """
            select r.*, coalesce(v.name, r.tenant_id) as tenant_name, coalesce(v.tier, 'unknown') as tier
            from revenue r
            left join lateral (
                select t.name, t.tier from tenants t
                where t.tenant_id = r.tenant_id and t.valid_from < r.revenue_date + interval 1 day
                order by t.valid_from desc limit 1
            ) v on true
            order by r.revenue_date, r.tenant_id
            """
        ).to_arrow_table()
    return to_frame(table)


def revenue_by_tenant(frame: pd.DataFrame) -> pd.DataFrame:
    """Totals per tenant over the days in ``frame`` (from :func:`revenue_by_tier`), largest gross revenue first."""
    amounts = ["orders_delivered", "gross_revenue", "courier_revenue", "platform_revenue", "tenant_revenue"]
    if frame.empty:
        return pd.DataFrame(columns=["tenant_id", "tenant_name", "tier", *amounts])
    # The tier of the tenant's last day in the range names its row.
    last = frame.sort_values("revenue_date").groupby("tenant_id").tail(1)[["tenant_id", "tenant_name", "tier"]]
    totals = frame.groupby("tenant_id", as_index=False)[amounts].sum()
    out = last.merge(totals, on="tenant_id").sort_values(["gross_revenue", "tenant_id"], ascending=[False, True])
    return out.reset_index(drop=True)
