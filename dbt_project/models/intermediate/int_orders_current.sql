{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('order_id', affected_order_ids()) }}",
) }}

with order_changes as (
    select *
    from {{ ref('stg_orders') }}
    {% if is_incremental() -%}
    where order_id in ({{ affected_order_ids() }})
    {%- endif %}
),

latest_change_per_order as (
    select *
    from (
        select *, row_number() over (partition by order_id order by _lsn desc) as change_rank
        from order_changes
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
    _lsn as last_lsn,
    _op as last_op,
    _event_time as last_event_time,
    _op = 'd' as is_deleted
from latest_change_per_order
