{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}

{#- Pings are not CDC: no _op, _lsn, _tx_id, _connector_ts; the ping_id is the event identity. -#}
with source as (
    select *
    from {{ source('bronze', 'tracking_pings') }}
    {%- if is_incremental() %}
    where {{ in_arrival_window('_arrival_hour', this) }}
    {%- endif %}
),

renamed as (
    select
        cast(ping_id as string) as ping_id,
        cast(courier_id as bigint) as courier_id,
        cast(order_id as bigint) as order_id,
        cast(lat as double) as lat,
        cast(lon as double) as lon,
        cast(speed_kmh as double) as speed_kmh,
        cast(recorded_at as timestamp) as recorded_at,
        _topic,
        _kafka_partition,
        _offset,
        _source_file,
        _event_id,
        _event_time,
        _arrival_hour,
        _is_late,
        _lateness_seconds
    from source
),

final as (
    {{ first_arrived_copies('renamed', source('bronze', 'tracking_pings')) }}
)

select * from final
{#- Event-time order keeps the zone maps of staging useful to the incremental lookups (see event_merge.sql). #}
order by _event_time
