{{ config(meta={'dagster': {'ref': {'name': 'dim_tenant'}}}) }}
-- Invariant 4b: every delivered order has exactly one tenant version valid at delivered_at.
with versions_at_delivery as (
    select deliveries.order_id, count(tenant_version.tenant_id) as valid_versions
    from {{ ref('fct_deliveries') }} as deliveries
    left join {{ ref('dim_tenant') }} as tenant_version
        on deliveries.tenant_id = tenant_version.tenant_id
        and deliveries.delivered_at >= tenant_version.valid_from
        and (tenant_version.valid_to is null or deliveries.delivered_at < tenant_version.valid_to)
    group by deliveries.order_id
)

select order_id, valid_versions
from versions_at_delivery
where valid_versions != 1
