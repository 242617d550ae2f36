{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('payment_id', affected_payment_ids()) }}",
) }}

with payment_changes as (
    select *
    from {{ ref('stg_payments') }}
    {% if is_incremental() -%}
    where payment_id in ({{ affected_payment_ids() }})
    {%- endif %}
),

latest_change_per_payment as (
    select *
    from (
        select *, row_number() over (partition by payment_id order by _lsn desc) as change_rank
        from payment_changes
    ) as ranked_changes
    where change_rank = 1
)

select
    payment_id,
    order_id,
    amount,
    method,
    status,
    created_at,
    updated_at,
    _lsn as last_lsn,
    _op as last_op,
    _event_time as last_event_time,
    _op = 'd' as is_deleted
from latest_change_per_payment
