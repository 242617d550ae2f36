{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook=[
        {"sql": "{{ widen_from(ref('stg_orders')) }}", "transaction": False},
        "{{ delete_affected('order_id', ref('int_affected_order_ids')) }}",
    ],
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
        {{ carried_forward('tenant_id') }} as tenant_id,
        {{ carried_forward('region') }} as region,
        {{ carried_forward('status') }} as status,
        courier_id,
        total_amount,
        delivery_fee,
        created_at,
        promised_at,
        delivered_at,
        updated_at,
        pickup_lat,
        pickup_lon,
        dropoff_lat,
        dropoff_lon,
        _op,
        _lsn,
        _event_time
    from order_changes
    window earlier as (partition by order_id order by _lsn rows between unbounded preceding and 1 preceding)
),

latest_change_per_order as (
    select *
    from (
        select *, row_number() over (partition by order_id order by _lsn desc) as change_rank
        from order_states
    ) as ranked_changes
    where change_rank = 1
)

select
    order_id,
    tenant_id,
    courier_id,
    region,
    status,
    total_amount,
    delivery_fee,
    created_at,
    promised_at,
    delivered_at,
    updated_at,
    pickup_lat,
    pickup_lon,
    dropoff_lat,
    dropoff_lon,
    _lsn as last_lsn,
    _op as last_op,
    _event_time as last_event_time,
    _op = 'd' as is_deleted
from latest_change_per_order
-- A truncate of the table after the order's last change ended it (int_truncates).
where not exists (
    select 1
    from {{ ref('int_truncates') }} as truncates
    where truncates.table_name = 'orders' and truncates.truncate_lsn > latest_change_per_order._lsn
)
