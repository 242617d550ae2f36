{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}

with source as (
    select *
    from {{ source('bronze', 'tenants') }}
    {%- if is_incremental() %}
    where {{ in_arrival_window('_arrival_hour', this) }}
    {%- endif %}
),

renamed as (
    select
        cast(tenant_id as string) as tenant_id,
        -- Debezium sends an unchanged TOASTed value as this placeholder: null here, flagged, and the value is
        -- carried forward from the tenant's previous event in int_tenant_versions (docs/contract/sources.md).
        cast(nullif(name, '__debezium_unavailable_value') as string) as name,
        cast(nullif(tier, '__debezium_unavailable_value') as string) as tier,
        cast(nullif(region, '__debezium_unavailable_value') as string) as region,
        coalesce(name = '__debezium_unavailable_value', false) as name_unavailable,
        coalesce(tier = '__debezium_unavailable_value', false) as tier_unavailable,
        coalesce(region = '__debezium_unavailable_value', false) as region_unavailable,
        cast(updated_at as timestamp) as updated_at,
        _topic,
        _kafka_partition,
        _offset,
        _source_file,
        _event_id,
        _event_time,
        _arrival_hour,
        _is_late,
        _lateness_seconds,
        _op,
        _lsn,
        _tx_id,
        _connector_ts
    from source
),

final as (
    {{ first_arrived_copies('renamed', source('bronze', 'tenants')) }}
)

select * from final
{#- Event-time order keeps the zone maps of staging useful to the incremental lookups (see event_merge.sql). #}
order by _event_time
