{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('window_start', ref('int_affected_order_windows')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_order_windows = ref('int_affected_order_windows') %}

with order_events as (
    select *
    from {{ ref('int_order_events') }}
    {% if is_incremental() -%}
    where window_start in (select window_start from {{ affected_order_windows }})
    {%- endif %}
),

-- Only on-time events count, unless an operator folded the late events of that window back in
-- (late_events lists exactly the events this leaves out).
counted_events as (
    select order_events.*
    from order_events
    left join (
        select window_start from {{ ref('stg_folded_windows') }} where topic = 'oltp.public.orders'
    ) as folded_windows
        on order_events.window_start = folded_windows.window_start
    where not order_events._is_late or folded_windows.window_start is not null
),

window_counts as (
    select
        window_start,
        region,
        count(distinct order_id) filter (where is_created_event) as orders_created,
        count(distinct order_id) filter (where is_delivered_change) as orders_delivered,
        count(distinct order_id) filter (where is_cancelled_change) as orders_cancelled
    from counted_events
    where is_created_event or is_delivered_change or is_cancelled_change
    group by window_start, region
)

select
    cast(window_start as timestamp) as window_start,
    cast(region as string) as region,
    cast(orders_created as bigint) as orders_created,
    cast(orders_delivered as bigint) as orders_delivered,
    cast(orders_cancelled as bigint) as orders_cancelled
from window_counts
