{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook=[
        {"sql": "{{ widen_from(ref('stg_payments')) }}", "transaction": False},
        "{{ delete_affected('payment_id', ref('int_affected_payment_ids')) }}",
    ],
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_payment_ids = ref('int_affected_payment_ids') %}

with payment_changes as (
    select *
    from {{ ref('stg_payments') }}
    {% if is_incremental() -%}
    where payment_id in (select payment_id from {{ affected_payment_ids }})
    {%- endif %}
),

-- A placeholder (unchanged TOAST) takes the payment's last earlier value (macros/carried_forward.sql).
payment_states as (
    select
        payment_id,
        {{ carried_forward('method') }} as method,
        {{ carried_forward('status') }} as status,
        order_id,
        amount,
        created_at,
        updated_at,
        _op,
        _lsn,
        _event_time
    from payment_changes
    window earlier as (partition by payment_id order by _lsn rows between unbounded preceding and 1 preceding)
),

latest_change_per_payment as (
    select *
    from (
        select *, row_number() over (partition by payment_id order by _lsn desc) as change_rank
        from payment_states
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
-- A truncate of the table after the payment's last change ended it (int_truncates).
where not exists (
    select 1
    from {{ ref('int_truncates') }} as truncates
    where truncates.table_name = 'payments' and truncates.truncate_lsn > latest_change_per_payment._lsn
)
