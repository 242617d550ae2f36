{{ config(meta={'dagster': {'ref': {'name': 'dim_tenant'}}}) }}
-- SCD2 integrity: versions of one tenant never overlap and leave no gap (a gap is only allowed after a delete,
-- which closes a version without opening the next one at the same instant).
with ordered_versions as (
    select
        tenant_id,
        valid_from,
        valid_to,
        lead(valid_from) over (partition by tenant_id order by valid_from) as next_valid_from
    from {{ ref('dim_tenant') }}
),

tenant_deletes as (
    select tenant_id, _event_time as deleted_at
    from {{ ref('stg_tenants') }}
    where _op = 'd'
)

select versions.tenant_id, versions.valid_from, versions.valid_to, versions.next_valid_from
from ordered_versions as versions
left join tenant_deletes
    on versions.tenant_id = tenant_deletes.tenant_id and versions.valid_to = tenant_deletes.deleted_at
where versions.next_valid_from is not null
    and (
        versions.valid_to is null
        or versions.valid_to > versions.next_valid_from
        or (versions.valid_to < versions.next_valid_from and tenant_deletes.deleted_at is null)
    )
