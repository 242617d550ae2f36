{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}

with source as (
    select *
    from {{ source('bronze', 'payments') }}
    {%- if is_incremental() %}
    where {{ in_arrival_window('_arrival_hour', this) }}
    {%- endif %}
),

renamed as (
    select
        cast(payment_id as bigint) as payment_id,
        cast(order_id as bigint) as order_id,
        cast(amount as decimal(12, 2)) as amount,
        -- Debezium sends an unchanged TOASTed value as this placeholder: null here, flagged, and the value is
        -- carried forward from the payment's previous event in the intermediate models (docs/contract/sources.md).
        cast(nullif(method, '__debezium_unavailable_value') as string) as method,
        cast(nullif(status, '__debezium_unavailable_value') as string) as status,
        coalesce(method = '__debezium_unavailable_value', false) as method_unavailable,
        coalesce(status = '__debezium_unavailable_value', false) as status_unavailable,
        cast(created_at as timestamp) as created_at,
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
    {{ first_arrived_copies('renamed', source('bronze', 'payments')) }}
)

select * from final
{#- Event-time order keeps the zone maps of staging useful to the incremental lookups (see event_merge.sql). #}
order by _event_time
