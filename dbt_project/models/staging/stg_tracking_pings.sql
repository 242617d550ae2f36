{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}

{{ stage_events(
    source('bronze', 'tracking_pings'),
    columns=[
        'cast(ping_id as varchar) as ping_id',
        'cast(courier_id as bigint) as courier_id',
        'cast(order_id as bigint) as order_id',
        'cast(lat as double) as lat',
        'cast(lon as double) as lon',
        'cast(speed_kmh as double) as speed_kmh',
        'cast(recorded_at as timestamp) as recorded_at',
    ],
    cdc=false,
) }}
