{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('courier_id', ref('int_affected_courier_ids')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_courier_ids = ref('int_affected_courier_ids') %}

with current_couriers as (
    select *
    from {{ ref('int_couriers_current') }}
    where not is_deleted
    {% if is_incremental() -%}
        and courier_id in (select courier_id from {{ affected_courier_ids }})
    {%- endif %}
)

select
    cast(courier_id as bigint) as courier_id,
    cast(name as string) as name,
    cast(region as string) as region,
    cast(vehicle as string) as vehicle,
    cast(active as boolean) as active
from current_couriers
