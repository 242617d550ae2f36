{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('courier_id', ref('int_affected_courier_ids')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_courier_ids = ref('int_affected_courier_ids') %}

with courier_changes as (
    select *
    from {{ ref('stg_couriers') }}
    {% if is_incremental() -%}
    where courier_id in (select courier_id from {{ affected_courier_ids }})
    {%- endif %}
),

-- A placeholder (unchanged TOAST) takes the courier's last earlier value (macros/carried_forward.sql).
courier_states as (
    select
        courier_id,
        {{ carried_forward('name') }} as name,
        {{ carried_forward('region') }} as region,
        {{ carried_forward('vehicle') }} as vehicle,
        active,
        updated_at,
        _op,
        _lsn,
        _event_time
    from courier_changes
    window earlier as (partition by courier_id order by _lsn rows between unbounded preceding and 1 preceding)
),

latest_change_per_courier as (
    select *
    from (
        select *, row_number() over (partition by courier_id order by _lsn desc) as change_rank
        from courier_states
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
-- A truncate of the table after the courier's last change ended it (int_truncates).
where not exists (
    select 1
    from {{ ref('int_truncates') }} as truncates
    where truncates.table_name = 'couriers' and truncates.truncate_lsn > latest_change_per_courier._lsn
)
