{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="
        {% if is_incremental() %}
        delete from {{ this }}
        where (topic = 'oltp.public.orders' and event_key in (select cast(order_id as string) from {{ ref('int_affected_order_ids') }}))
            or (topic = 'logistics.tracking_pings' and event_id in (select event_id from {{ ref('int_affected_ping_event_ids') }}))
            or window_start in ({{ refresh_windows() }})
        {% else %}select 1{% endif %}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_order_ids = ref('int_affected_order_ids') %}
{%- set affected_ping_event_ids = ref('int_affected_ping_event_ids') %}

with order_events as (
    select *
    from {{ ref('int_order_events') }}
    {% if is_incremental() -%}
    where order_id in (select order_id from {{ affected_order_ids }})
        or window_start in ({{ refresh_windows() }})
    {%- endif %}
),

pings as (
    select *
    from {{ ref('stg_tracking_pings') }}
    {% if is_incremental() -%}
    -- The pings of int_affected_ping_event_ids, read straight from their rows (one row per event in staging): a range
    -- on _arrival_hour that DuckDB prunes by row-group min/max, instead of probing every staged _event_id.
    where {{ in_arrival_window('_arrival_hour', ref('stg_tracking_pings')) }}
        {%- if var('refresh_window_starts', []) | length > 0 %}
        or date_trunc('hour', _event_time) in ({{ refresh_windows() }})
        {%- endif %}
    {%- endif %}
),

folded_windows as (
    select topic, window_start
    from {{ ref('stg_folded_windows') }}
),

-- Late order events that would have changed fct_hourly_region_orders (creations, changes to delivered/cancelled).
late_order_events as (
    select
        _topic as topic,
        _event_id as event_id,
        cast(order_id as string) as event_key,
        _lsn as lsn,
        _op as op,
        _event_time as event_time,
        _arrival_hour as arrival_hour,
        _lateness_seconds as lateness_seconds,
        window_start,
        'fct_hourly_region_orders' as window_mart
    from order_events
    where _is_late and (is_created_event or is_delivered_change or is_cancelled_change)
),

-- Late pings would have changed fct_courier_hourly_activity.
late_pings as (
    select
        _topic as topic,
        _event_id as event_id,
        ping_id as event_key,
        cast(null as bigint) as lsn,
        cast(null as string) as op,
        _event_time as event_time,
        _arrival_hour as arrival_hour,
        _lateness_seconds as lateness_seconds,
        date_trunc('hour', _event_time) as window_start,
        'fct_courier_hourly_activity' as window_mart
    from pings
    where _is_late
),

all_late_events as (
    select * from late_order_events
    union all
    select * from late_pings
),

-- Events of folded windows were folded back in: the windowed marts no longer leave them out.
still_left_out as (
    select all_late_events.*
    from all_late_events
    left join folded_windows
        on all_late_events.topic = folded_windows.topic
        and all_late_events.window_start = folded_windows.window_start
    where folded_windows.window_start is null
)

select
    cast(topic as string) as topic,
    cast(event_id as string) as event_id,
    cast(event_key as string) as event_key,
    cast(lsn as bigint) as lsn,
    cast(op as string) as op,
    cast(event_time as timestamp) as event_time,
    cast(arrival_hour as timestamp) as arrival_hour,
    cast(lateness_seconds as bigint) as lateness_seconds,
    cast(window_start as timestamp) as window_start,
    cast(window_mart as string) as window_mart,
    'late_beyond_tolerance' as reason
from still_left_out
