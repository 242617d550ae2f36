-- (revenue_date, tenant_id) pairs: every date any version of an affected order was delivered on, for the tenant of
-- that version; and, for tenants with new changes from event time T on (a snapshot read: from the start of history),
-- every date with a delivery at or after T.
select distinct cast(orders.delivered_at as date) as revenue_date, orders.tenant_id
from {{ ref('stg_orders') }} as orders
inner join {{ ref('int_affected_order_ids') }} as affected
    on orders.order_id = affected.order_id
where orders.delivered_at is not null and orders.tenant_id is not null
union
select distinct cast(deliveries.delivered_at as date) as revenue_date, deliveries.tenant_id
from {{ ref('fct_deliveries') }} as deliveries
-- Read from staging, not from int_affected_tenant_ids: that set is skipped with the tenant models in an hour without
-- tenant changes, while this one runs with every order change.
inner join (
    -- A snapshot read can open the tenant's first version, valid from the start of history (int_tenant_versions).
    select tenant_id, min(case when _op = 'r' then {{ start_of_history() }} else _event_time end) as changed_from
    from {{ ref('stg_tenants') }}
    where {{ in_arrival_window('_arrival_hour', ref('stg_tenants')) }}
    group by tenant_id
) as changed_tenants
    on deliveries.tenant_id = changed_tenants.tenant_id
    and deliveries.delivered_at >= changed_tenants.changed_from
