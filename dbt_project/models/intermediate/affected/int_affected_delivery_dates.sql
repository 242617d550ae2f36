-- Delivery dates whose rows of fct_region_delivery_daily may have changed: the dates any version of an affected order
-- was delivered on, and the 7 dates after each (their baseline holds it).
select distinct cast(touched.delivery_date + shift.days as date) as delivery_date
from (
    select distinct cast(orders.delivered_at as date) as delivery_date
    from {{ ref('stg_orders') }} as orders
    inner join {{ ref('int_affected_order_ids') }} as affected
        on orders.order_id = affected.order_id
    where orders.delivered_at is not null
) as touched
cross join (values (0), (1), (2), (3), (4), (5), (6), (7)) as shift(days)
