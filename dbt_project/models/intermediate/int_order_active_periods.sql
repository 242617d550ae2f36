{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('order_id', ref('int_affected_order_ids')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_order_ids = ref('int_affected_order_ids') %}

with order_changes as (
    select *
    from {{ ref('stg_orders') }}
    {% if is_incremental() -%}
    where order_id in (select order_id from {{ affected_order_ids }})
    {%- endif %}
),

-- A placeholder (unchanged TOAST) takes the order's last earlier value (macros/carried_forward.sql).
order_states as (
    select
        order_id,
        courier_id,
        {{ carried_forward('region') }} as region,
        {{ carried_forward('status') }} as status,
        pickup_lat,
        pickup_lon,
        dropoff_lat,
        dropoff_lon,
        _op,
        _lsn,
        _event_time,
        lead(_event_time) over (partition by order_id order by _lsn) as next_event_time
    from order_changes
    window earlier as (partition by order_id order by _lsn rows between unbounded preceding and 1 preceding)
)

select
    cast(order_id as bigint) as order_id,
    cast(courier_id as bigint) as courier_id,
    cast(_lsn as bigint) as change_lsn,
    cast(status as string) as status,
    cast(region as string) as region,
    cast(_event_time as timestamp) as valid_from,
    -- The next change by log position can carry an earlier event time (clocks, late commits): the period is then
    -- empty, not negative.
    cast(case when next_event_time < _event_time then _event_time else next_event_time end as timestamp) as valid_to,
    cast(pickup_lat as double) as pickup_lat,
    cast(pickup_lon as double) as pickup_lon,
    cast(dropoff_lat as double) as dropoff_lat,
    cast(dropoff_lon as double) as dropoff_lon
from order_states
where _op != 'd' and status in ('assigned', 'picked_up', 'in_transit') and courier_id is not null
