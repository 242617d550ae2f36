{{ config(
    materialized='incremental',
    incremental_strategy='event_merge',
    unique_key='_event_id',
    on_schema_change=('sync_all_columns' if target.type == 'duckdb' else 'append_new_columns'),
) }}

{#- Columns the orders table gained after the contract (additive schema evolution, e.g. tip_amount) flow through;
    on DuckDB one an operator accepted as text (`run --accept-type`, docs/operations.md) is re-typed here too. -#}
{%- set contract_columns = [
    'order_id', 'tenant_id', 'courier_id', 'region', 'status', 'total_amount', 'delivery_fee',
    'created_at', 'promised_at', 'delivered_at', 'updated_at'] -%}
{#- The coordinates, added part way too, are staged from the start (null until bronze has them): models read them. -#}
{%- set coordinates = ['pickup_lat', 'pickup_lon', 'dropoff_lat', 'dropoff_lon'] -%}
{%- set bronze_columns = relation_column_names(source('bronze', 'orders')) -%}
{%- set added_columns = [] -%}
{%- for column in bronze_columns -%}
    {%- if column not in contract_columns + coordinates and not column.startswith('_') -%}
        {%- do added_columns.append(column) -%}
    {%- endif -%}
{%- endfor %}
{#- Amounts: the contract's decimal(12, 2), or the wider type bronze promoted the column to (sources.md, "Types that
    widen"), so that a widened source value never overflows here. -#}
{%- set amount_types = {} -%}
{%- for column in ['total_amount', 'delivery_fee'] -%}
    {%- do amount_types.update({column: bronze_decimal(source('bronze', 'orders'), column, 'decimal(12, 2)')}) -%}
{%- endfor %}
{%- if is_incremental() %}
{#- The event-time range of the window's bronze copies: the staged rows of those events lie inside it. #}
{%- set staged_bounds = event_time_bounds(source('bronze', 'orders'), in_arrival_window('_arrival_hour', this)) %}
{%- endif %}

with source as (
    select *
    from {{ source('bronze', 'orders') }}
    where _op != 't'  -- a truncate has no key: stg_truncates stages it
    {%- if is_incremental() %}
        and {{ in_arrival_window('_arrival_hour', this) }}
    {%- endif %}
),

renamed as (
    select
        cast(order_id as bigint) as order_id,
        -- Debezium sends an unchanged TOASTed value as this placeholder: null here, flagged, and the value is
        -- carried forward from the order's previous event in the intermediate models (docs/contract/sources.md).
        cast(nullif(tenant_id, '__debezium_unavailable_value') as string) as tenant_id,
        cast(courier_id as bigint) as courier_id,
        cast(nullif(region, '__debezium_unavailable_value') as string) as region,
        cast(nullif(status, '__debezium_unavailable_value') as string) as status,
        coalesce(tenant_id = '__debezium_unavailable_value', false) as tenant_id_unavailable,
        coalesce(region = '__debezium_unavailable_value', false) as region_unavailable,
        coalesce(status = '__debezium_unavailable_value', false) as status_unavailable,
        cast(total_amount as {{ amount_types['total_amount'] }}) as total_amount,
        cast(delivery_fee as {{ amount_types['delivery_fee'] }}) as delivery_fee,
        cast(created_at as timestamp) as created_at,
        cast(promised_at as timestamp) as promised_at,
        cast(delivered_at as timestamp) as delivered_at,
        cast(updated_at as timestamp) as updated_at,
        {%- for column in coordinates %}
        cast({{ column if column in bronze_columns else 'null' }} as double) as {{ column }},
        {%- endfor %}
        {%- for column in added_columns %}
        {{ column }},
        {%- endfor %}
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
