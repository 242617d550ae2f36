{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('order_id', ref('int_affected_order_ids')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_order_ids = ref('int_affected_order_ids') %}

with current_orders as (
    select *
    from {{ ref('int_orders_current') }}
    where not is_deleted
    {% if is_incremental() -%}
        and order_id in (select order_id from {{ affected_order_ids }})
    {%- endif %}
)

select
    cast(order_id as bigint) as order_id,
    cast(tenant_id as string) as tenant_id,
    cast(courier_id as bigint) as courier_id,
    cast(region as string) as region,
    cast(status as string) as status,
    cast(total_amount as decimal(12, 2)) as total_amount,
    cast(delivery_fee as decimal(12, 2)) as delivery_fee,
    cast(created_at as timestamp) as created_at,
    cast(promised_at as timestamp) as promised_at,
    cast(delivered_at as timestamp) as delivered_at,
    cast(updated_at as timestamp) as updated_at,
    cast(last_lsn as bigint) as last_lsn
from current_orders
