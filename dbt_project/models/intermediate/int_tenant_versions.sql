{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="{{ delete_affected('tenant_id', ref('int_affected_tenant_ids')) }}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_tenant_ids = ref('int_affected_tenant_ids') %}

with tenant_events as (
    select
        tenant_id, name, tier, region, name_unavailable, tier_unavailable, region_unavailable, _op, _lsn, _event_time
    from {{ ref('stg_tenants') }}
    {% if is_incremental() -%}
    where tenant_id in (select tenant_id from {{ affected_tenant_ids }})
    {%- endif %}
),

-- A truncate of tenants closes the version each tenant seen before it has open, as a delete does (int_truncates).
tenant_truncates as (
    select
        seen.tenant_id,
        cast(null as string) as name,
        cast(null as string) as tier,
        cast(null as string) as region,
        false as name_unavailable,
        false as tier_unavailable,
        false as region_unavailable,
        'd' as _op,
        truncates.truncate_lsn as _lsn,
        truncates.truncated_at as _event_time
    from (select tenant_id, min(_lsn) as first_lsn from tenant_events group by tenant_id) as seen
    inner join {{ ref('int_truncates') }} as truncates
        on truncates.table_name = 'tenants' and truncates.truncate_lsn > seen.first_lsn
),

tenant_events_and_truncates as (
    select * from tenant_events
    union all
    select * from tenant_truncates
),

-- A placeholder (unchanged TOAST) takes the tenant's last earlier value (macros/carried_forward.sql).
tenant_changes as (
    select
        tenant_id,
        {{ carried_forward('name') }} as name,
        {{ carried_forward('tier') }} as tier,
        {{ carried_forward('region') }} as region,
        _op,
        _lsn,
        _event_time
    from tenant_events_and_truncates
    window earlier as (partition by tenant_id order by _lsn rows between unbounded preceding and 1 preceding)
),

changes_with_previous_state as (
    select
        *,
        lag(_op) over by_lsn as previous_op,
        lag(name) over by_lsn as previous_name,
        lag(tier) over by_lsn as previous_tier,
        lag(region) over by_lsn as previous_region
    from tenant_changes
    window by_lsn as (partition by tenant_id order by _lsn)
),

-- A version opens on the first change of a tenant, after a delete, or when name, tier or region change;
-- a delete closes the open version. Other changes (updated_at only) are no-ops for the dimension.
version_boundaries as (
    select *
    from changes_with_previous_state
    where _op = 'd'
        or previous_op is null
        or previous_op = 'd'
        or name is distinct from previous_name
        or tier is distinct from previous_tier
        or region is distinct from previous_region
),

-- A tenant whose first event is a snapshot read existed before the platform saw it: its first version is valid from
-- the start of history (macros/start_of_history.sql), so facts older than the snapshot fall in it. A version opened by
-- a change starts at the change's event time.
versions_and_deletes as (
    select
        tenant_id,
        name,
        tier,
        region,
        _op,
        _lsn as opened_by_lsn,
        case
            when previous_op is null and _op = 'r' then {{ start_of_history() }}
            else _event_time
        end as valid_from,
        lead(_event_time) over (partition by tenant_id order by _lsn) as valid_to
    from version_boundaries
)

select
    tenant_id,
    name,
    tier,
    region,
    valid_from,
    valid_to,
    valid_to is null as is_current,
    opened_by_lsn
from versions_and_deletes
where _op != 'd'
