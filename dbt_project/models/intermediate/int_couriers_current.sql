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

-- A column the connector sent as the unchanged-TOAST placeholder keeps its value from the courier's last earlier
-- event that had one (in lsn order; wrapped in a struct so that a real null is carried as a value too).
courier_states as (
    select
        courier_id,
        case
            when name_unavailable
                then {{ last_value_where('name', 'not name_unavailable', 'earlier') }}
            else name
        end as name,
        case
            when region_unavailable
                then {{ last_value_where('region', 'not region_unavailable', 'earlier') }}
            else region
        end as region,
        case
            when vehicle_unavailable
                then {{ last_value_where('vehicle', 'not vehicle_unavailable', 'earlier') }}
            else vehicle
        end as vehicle,
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
