{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="
        {% if is_incremental() %}
        {{ delete_affected('delivery_date', ref('int_affected_delivery_dates')) }}
        {% else %}select 1{% endif %}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_delivery_dates = ref('int_affected_delivery_dates') %}

{% if is_incremental() -%}
with rebuilt_dates as (
    select delivery_date from {{ affected_delivery_dates }}
),
{%- else -%}
with
{%- endif %}

-- Exact: an integer sum of microseconds, then one division (in double precision on both engines: a decimal literal would make Spark divide in decimals). A float sum depends on the order rows arrive in, and
-- the incremental build must equal the full refresh bit for bit.
daily as (
    select
        cast(delivered_at as date) as delivery_date,
        region,
        count(*) as deliveries,
        sum({{ epoch_us('delivered_at') }} - {{ epoch_us('created_at') }}) / (count(*) * cast(60000000 as double)) as avg_delivery_minutes
    from {{ ref('fct_deliveries') }}
    {% if is_incremental() -%}
    -- The rebuilt dates and the 7 before each (their baselines).
    where cast(delivered_at as date) >= (select min(delivery_date) - 7 from rebuilt_dates)
    {%- endif %}
    group by all
),

baselines as (
    select
        target.delivery_date,
        target.region,
        count(baseline.delivery_date) as baseline_days,
        -- Ordered aggregates: the same float operations in the same order on every build.
        {{ ordered_avg('baseline.avg_delivery_minutes', 'baseline.delivery_date') }} as baseline_avg_minutes,
        {{ ordered_stddev_samp('baseline.avg_delivery_minutes', 'baseline.delivery_date') }} as baseline_stddev_minutes
    from daily as target
    left join daily as baseline
        on target.region = baseline.region
        and baseline.delivery_date between target.delivery_date - 7 and target.delivery_date - 1
    group by target.delivery_date, target.region
),

scored as (
    select
        daily.delivery_date,
        daily.region,
        daily.deliveries,
        daily.avg_delivery_minutes,
        baselines.baseline_days,
        case when baselines.baseline_days >= 3 then baselines.baseline_avg_minutes end as baseline_avg_minutes,
        case when baselines.baseline_days >= 3 then baselines.baseline_stddev_minutes end as baseline_stddev_minutes
    from daily
    inner join baselines
        on daily.delivery_date = baselines.delivery_date and daily.region = baselines.region
    {% if is_incremental() -%}
    where daily.delivery_date in (select delivery_date from rebuilt_dates)
    {%- endif %}
)

select
    cast(delivery_date as date) as delivery_date,
    cast(region as string) as region,
    cast(deliveries as bigint) as deliveries,
    cast(avg_delivery_minutes as double) as avg_delivery_minutes,
    cast(baseline_days as integer) as baseline_days,
    cast(baseline_avg_minutes as double) as baseline_avg_minutes,
    cast(baseline_stddev_minutes as double) as baseline_stddev_minutes,
    cast(
        coalesce(abs(avg_delivery_minutes - baseline_avg_minutes) > 3 * baseline_stddev_minutes, false) as boolean
    ) as is_anomaly
from scored
