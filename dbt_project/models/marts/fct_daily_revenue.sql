{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="
        {% if is_incremental() %}
        {{ delete_matching(this, 'select * from ' ~ ref('int_affected_revenue_keys'),
            'target.revenue_date = affected.revenue_date and target.tenant_id = affected.tenant_id') }}
        {% else %}select 1{% endif %}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_revenue_keys = ref('int_affected_revenue_keys') %}

-- Amounts are not part of fct_deliveries' contract: take them from the same order in fct_orders.
with deliveries as (
    select
        deliveries.order_id,
        deliveries.tenant_id,
        deliveries.delivered_at,
        cast(deliveries.delivered_at as date) as revenue_date,
        orders.total_amount,
        orders.delivery_fee
    from {{ ref('fct_deliveries') }} as deliveries
    inner join {{ ref('fct_orders') }} as orders
        on deliveries.order_id = orders.order_id
    {% if is_incremental() -%}
    inner join {{ affected_revenue_keys }} as affected
        on cast(deliveries.delivered_at as date) = affected.revenue_date
        and deliveries.tenant_id = affected.tenant_id
    {%- endif %}
),

-- The tier that applies is the one of the tenant version valid at delivered_at, not the current one.
deliveries_with_fee as (
    select
        deliveries.revenue_date,
        deliveries.tenant_id,
        deliveries.total_amount,
        deliveries.delivery_fee,
        round(deliveries.total_amount * pricing.fee_pct, 2) as platform_fee
    from deliveries
    left join {{ ref('dim_tenant') }} as tenant_version
        on deliveries.tenant_id = tenant_version.tenant_id
        and deliveries.delivered_at >= tenant_version.valid_from
        and (tenant_version.valid_to is null or deliveries.delivered_at < tenant_version.valid_to)
    left join {{ ref('tier_pricing') }} as pricing
        on tenant_version.tier = pricing.tier
),

daily_totals as (
    select
        revenue_date,
        tenant_id,
        count(*) as orders_delivered,
        sum(total_amount) as gross_revenue,
        sum(delivery_fee) as courier_revenue,
        sum(platform_fee) as platform_revenue
    from deliveries_with_fee
    group by revenue_date, tenant_id
)

select
    cast(revenue_date as date) as revenue_date,
    cast(tenant_id as string) as tenant_id,
    cast(orders_delivered as bigint) as orders_delivered,
    cast(gross_revenue as decimal(12, 2)) as gross_revenue,
    cast(courier_revenue as decimal(12, 2)) as courier_revenue,
    cast(platform_revenue as decimal(12, 2)) as platform_revenue,
    cast(gross_revenue - courier_revenue - platform_revenue as decimal(12, 2)) as tenant_revenue
from daily_totals
