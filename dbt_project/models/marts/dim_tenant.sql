{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('tenant_id', ref('int_affected_tenant_ids')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_tenant_ids = ref('int_affected_tenant_ids') %}

with tenant_versions as (
    select *
    from {{ ref('int_tenant_versions') }}
    {% if is_incremental() -%}
    where tenant_id in (select tenant_id from {{ affected_tenant_ids }})
    {%- endif %}
)

select
    cast(tenant_id as string) as tenant_id,
    cast(name as string) as name,
    cast(tier as string) as tier,
    cast(region as string) as region,
    cast(valid_from as timestamp) as valid_from,
    cast(valid_to as timestamp) as valid_to,
    cast(is_current as boolean) as is_current
from tenant_versions
