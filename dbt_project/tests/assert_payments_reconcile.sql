{{ config(severity='warn', meta={'dagster': {'ref': {'name': 'fct_deliveries'}}}) }}
-- Invariant 5 (a warning, not an error: the data is reported, never hidden or fixed up):
-- for a delivered order, captured minus refunded payments equal total_amount.
with payment_balance as (
    select
        order_id,
        coalesce(sum(amount) filter (where status = 'captured'), 0)
            - coalesce(sum(amount) filter (where status = 'refunded'), 0) as net_captured
    from {{ ref('int_payments_current') }}
    where not is_deleted
    group by order_id
)

select
    orders.order_id,
    orders.total_amount,
    coalesce(payment_balance.net_captured, 0) as net_captured
from {{ ref('fct_deliveries') }} as deliveries
inner join {{ ref('fct_orders') }} as orders on deliveries.order_id = orders.order_id
left join payment_balance on deliveries.order_id = payment_balance.order_id
where coalesce(payment_balance.net_captured, 0) != orders.total_amount
