{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}

{{ stage_events(
    source('bronze', 'tenants'),
    columns=[
        'cast(tenant_id as varchar) as tenant_id',
        'cast(name as varchar) as name',
        'cast(tier as varchar) as tier',
        'cast(region as varchar) as region',
        'cast(updated_at as timestamp) as updated_at',
    ],
) }}
