{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('courier_id', affected_courier_ids()) }}",
) }}

with courier_changes as (
    select *
    from {{ ref('stg_couriers') }}
    {% if is_incremental() -%}
    where courier_id in ({{ affected_courier_ids() }})
    {%- endif %}
),

latest_change_per_courier as (
    select *
    from (
        select *, row_number() over (partition by courier_id order by _lsn desc) as change_rank
        from courier_changes
    ) as ranked_changes
    where change_rank = 1
)

select
    courier_id,
    name,
    region,
    vehicle,
    active,
    updated_at,
    _lsn as last_lsn,
    _op as last_op,
    _event_time as last_event_time,
    _op = 'd' as is_deleted
from latest_change_per_courier
