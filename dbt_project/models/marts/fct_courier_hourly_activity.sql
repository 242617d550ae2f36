{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('window_start', ref('int_affected_ping_windows')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_ping_windows = ref('int_affected_ping_windows') %}

with pings as (
    select ping_id, courier_id, _event_time, _is_late, date_trunc('hour', _event_time) as window_start
    from {{ ref('stg_tracking_pings') }}
    {% if is_incremental() -%}
    -- The range predicate lets DuckDB skip row groups by min/max before the exact window filter.
    where _event_time >= (select min(window_start) from {{ affected_ping_windows }})
        and _event_time < (select max(window_start) + interval 1 hour from {{ affected_ping_windows }})
        and date_trunc('hour', _event_time) in (select window_start from {{ affected_ping_windows }})
    {%- endif %}
),

-- Only on-time pings count, unless an operator folded the late pings of that window back in
-- (late_events lists exactly the pings this leaves out).
counted_pings as (
    select pings.*
    from pings
    left join (
        select window_start from {{ ref('stg_folded_windows') }} where topic = 'logistics.tracking_pings'
    ) as folded_windows
        on pings.window_start = folded_windows.window_start
    where not pings._is_late or folded_windows.window_start is not null
),

courier_windows as (
    select
        window_start,
        courier_id,
        count(distinct ping_id) as pings,
        min(_event_time) as first_ping_at,
        max(_event_time) as last_ping_at
    from counted_pings
    group by window_start, courier_id
)

select
    cast(window_start as timestamp) as window_start,
    cast(courier_id as bigint) as courier_id,
    cast(pings as bigint) as pings,
    cast(first_ping_at as timestamp) as first_ping_at,
    cast(last_ping_at as timestamp) as last_ping_at
from courier_windows
