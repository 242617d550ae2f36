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
        _event_id,
        _topic,
        order_id,
        _lsn,
        _op,
        _event_time,
        {{ carried_forward('region') }} as region,
        {{ carried_forward('status') }} as status,
        _is_late,
        _arrival_hour,
        _lateness_seconds
    from order_changes
    window earlier as (partition by order_id order by _lsn rows between unbounded preceding and 1 preceding)
),

changes_with_previous_status as (
    select
        *,
        lag(status) over (partition by order_id order by _lsn) as previous_status
    from order_states
)

select
    _event_id,
    _topic,
    order_id,
    _lsn,
    _op,
    _event_time,
    date_trunc('hour', _event_time) as window_start,
    region,
    status,
    previous_status,
    _op in ('c', 'r') as is_created_event,
    _op != 'd' and status = 'delivered' and previous_status is distinct from 'delivered' as is_delivered_change,
    _op != 'd' and status = 'cancelled' and previous_status is distinct from 'cancelled' as is_cancelled_change,
    _is_late,
    _arrival_hour,
    _lateness_seconds
from changes_with_previous_status
