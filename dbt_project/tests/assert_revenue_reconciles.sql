{{ config(meta={'dagster': {'ref': {'name': 'fct_daily_revenue'}}}) }}
-- Invariant 4a: gross_revenue = tenant_revenue + courier_revenue + platform_revenue, exactly, on every row;
-- and the daily rows add up to the delivered orders they are built from.
with unbalanced_rows as (
    select revenue_date, tenant_id, 'components do not add up to gross_revenue' as problem
    from {{ ref('fct_daily_revenue') }}
    where gross_revenue is distinct from tenant_revenue + courier_revenue + platform_revenue
),

delivered_per_day as (
    select cast(deliveries.delivered_at as date) as revenue_date, deliveries.tenant_id,
        count(*) as orders_delivered, sum(orders.total_amount) as gross_revenue
    from {{ ref('fct_deliveries') }} as deliveries
    inner join {{ ref('fct_orders') }} as orders on deliveries.order_id = orders.order_id
    group by all
),

mismatched_totals as (
    select
        coalesce(revenue.revenue_date, delivered.revenue_date) as revenue_date,
        coalesce(revenue.tenant_id, delivered.tenant_id) as tenant_id,
        'daily revenue does not match fct_deliveries' as problem
    from {{ ref('fct_daily_revenue') }} as revenue
    full outer join delivered_per_day as delivered
        on revenue.revenue_date = delivered.revenue_date and revenue.tenant_id = delivered.tenant_id
    where revenue.orders_delivered is distinct from delivered.orders_delivered
        or revenue.gross_revenue is distinct from delivered.gross_revenue
)

select * from unbalanced_rows
union all
select * from mismatched_totals
