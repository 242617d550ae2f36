{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}
{#- Debezium's TRUNCATE events (op t, sent with skipped.operations=none) of the CDC tables: no key, no row image, only
    the table and its position. The other staging models leave them out (their key is null). -#}
{%- set cdc_tables = ['tenants', 'couriers', 'orders', 'payments'] %}

with renamed as (
    {%- for table in cdc_tables %}
    select
        cast('{{ table }}' as string) as table_name,
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
    from {{ source('bronze', table) }}
    where _op = 't'
    {%- if is_incremental() %}
        and {{ in_arrival_window('_arrival_hour', this) }}
    {%- endif %}
    {{ 'union all' if not loop.last }}
    {%- endfor %}
),

{% if is_incremental() -%}
-- The row staged so far for each truncate of the window competes with its new copies (a handful of rows: no bounds).
staged as (
    select {{ star_except(['_staged_by']) }}
    from {{ this }}
    where _event_id in (select _event_id from renamed)
),

copies as (
    {{ union_all_by_name('renamed', 'staged', this, ['_staged_by']) }}
),
{%- else -%}
copies as (
    select * from renamed
),
{%- endif %}

-- Copies of one truncate (connector redeliveries) collapse to the copy that arrived first, as in the other staging
-- models; it is on time if any copy is.
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
order by _event_time
