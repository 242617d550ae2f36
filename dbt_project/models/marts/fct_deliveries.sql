{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('order_id', ref('int_affected_order_ids')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_order_ids = ref('int_affected_order_ids') %}

with delivered_orders as (
    select *
    from {{ ref('fct_orders') }}
    where status = 'delivered'
    {% if is_incremental() -%}
        and order_id in (select order_id from {{ affected_order_ids }})
    {%- endif %}
)

select
    cast(order_id as bigint) as order_id,
    cast(tenant_id as string) as tenant_id,
    cast(courier_id as bigint) as courier_id,
    cast(region as string) as region,
    cast(created_at as timestamp) as created_at,
    cast(promised_at as timestamp) as promised_at,
    cast(delivered_at as timestamp) as delivered_at,
    cast({{ seconds_between('created_at', 'delivered_at') }} / cast(60 as double) as double) as delivery_minutes,
    cast(greatest(0, {{ seconds_between('promised_at', 'delivered_at') }}) / cast(60 as double) as double) as minutes_late,
    cast(delivered_at <= promised_at as boolean) as is_on_time
from delivered_orders
