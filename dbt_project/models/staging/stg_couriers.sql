{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}

{{ stage_events(
    source('bronze', 'couriers'),
    columns=[
        'cast(courier_id as bigint) as courier_id',
        'cast(name as varchar) as name',
        'cast(region as varchar) as region',
        'cast(vehicle as varchar) as vehicle',
        'cast(active as boolean) as active',
        'cast(updated_at as timestamp) as updated_at',
    ],
) }}
