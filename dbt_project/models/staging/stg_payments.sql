{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}
{%- if is_incremental() %}
{#- The event-time range of the window's bronze copies: the staged rows of those events lie inside it. #}
{%- set staged_bounds = event_time_bounds(source('bronze', 'payments'), in_arrival_window('_arrival_hour', this)) %}
{%- endif %}

with source as (
    select *
    from {{ source('bronze', 'payments') }}
    where _op != 't'  -- a truncate has no key: stg_truncates stages it
    {%- if is_incremental() %}
        and {{ in_arrival_window('_arrival_hour', this) }}
    {%- endif %}
),

renamed as (
    select
        cast(payment_id as bigint) as payment_id,
        cast(order_id as bigint) as order_id,
        -- The contract's decimal(12, 2), or the wider type bronze promoted it to (sources.md, "Types that widen").
        cast(amount as {{ bronze_decimal(source('bronze', 'payments'), 'amount', 'decimal(12, 2)') }}) as amount,
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

{% if is_incremental() -%}
-- The row staged so far for each event of the window competes with its new copies: hours can then be processed in any
-- order and re-run any number of times.
staged as (
    select {{ star_except(['_staged_by']) }}
    from {{ this }}
    where {{ within_event_time(staged_bounds) }} and _event_id in (select _event_id from renamed)
),

copies as (
    {{ union_all_by_name('renamed', 'staged', this, ['_staged_by']) }}
),
{%- else -%}
copies as (
    select * from renamed
),
{%- endif %}

-- Copies of one event (connector redeliveries, at other offsets and arrival hours) collapse to the copy that arrived
-- first (then lowest partition/offset): its address, arrival hour and lateness are kept. The event is on time if any
-- copy is. Both rules are order-independent and idempotent.
ranked as (
    select
        *,
        bool_and(_is_late) over (partition by _event_id) as _is_late_everywhere,
        row_number() over (
            partition by _event_id order by _arrival_hour, _kafka_partition, _offset, _source_file
        ) as copy_rank
    from copies
),

final as (
    select
        {{ star_except(['copy_rank', '_is_late', '_is_late_everywhere']) }},
        _is_late_everywhere as _is_late,
        '{{ invocation_id }}' as _staged_by
    from ranked
    where copy_rank = 1
)

select * from final
{#- Event-time order keeps the zone maps of staging useful to the incremental lookups (macros/event_merge.sql). #}
order by _event_time
