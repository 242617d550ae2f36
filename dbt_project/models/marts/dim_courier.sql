{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('courier_id', affected_courier_ids()) }}",
) }}
-- depends_on: {{ ref('stg_couriers') }}

with current_couriers as (
    select *
    from {{ ref('int_couriers_current') }}
    where not is_deleted
    {% if is_incremental() -%}
        and courier_id in ({{ affected_courier_ids() }})
    {%- endif %}
)

select
    cast(courier_id as bigint) as courier_id,
    cast(name as string) as name,
    cast(region as string) as region,
    cast(vehicle as string) as vehicle,
    cast(active as boolean) as active
from current_couriers
