-- (revenue_date, tenant_id) pairs: every date any version of an affected order was delivered on, for the tenant of
-- that version; and, for tenants with new changes from event time T on, every date with a delivery at or after T.
select distinct cast(orders.delivered_at as date) as revenue_date, orders.tenant_id
from {{ ref('stg_orders') }} as orders
inner join {{ ref('int_affected_order_ids') }} as affected
    on orders.order_id = affected.order_id
where orders.delivered_at is not null and orders.tenant_id is not null
union
select distinct cast(deliveries.delivered_at as date) as revenue_date, deliveries.tenant_id
from {{ ref('fct_deliveries') }} as deliveries
inner join {{ ref('int_affected_tenant_ids') }} as changed_tenants
    on deliveries.tenant_id = changed_tenants.tenant_id
    and deliveries.delivered_at >= changed_tenants.first_changed_at
