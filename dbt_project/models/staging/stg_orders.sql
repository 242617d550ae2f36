{{ config(
    materialized='incremental',
    incremental_strategy='event_merge',
    unique_key='_event_id',
    on_schema_change='append_new_columns',
) }}

{#- Columns the orders table gained after the contract (additive schema evolution, e.g. tip_amount) flow through. -#}
{%- set contract_columns = [
    'order_id', 'tenant_id', 'courier_id', 'region', 'status', 'total_amount', 'delivery_fee',
    'created_at', 'promised_at', 'delivered_at', 'updated_at'] -%}
{%- set added_columns = [] -%}
{%- for column in relation_column_names(source('bronze', 'orders')) -%}
    {%- if column not in contract_columns and not column.startswith('_') -%}
        {%- do added_columns.append(column) -%}
    {%- endif -%}
{%- endfor -%}

{{ stage_events(
    source('bronze', 'orders'),
    columns=[
        'cast(order_id as bigint) as order_id',
        'cast(tenant_id as varchar) as tenant_id',
        'cast(courier_id as bigint) as courier_id',
        'cast(region as varchar) as region',
        'cast(status as varchar) as status',
        'cast(total_amount as decimal(12, 2)) as total_amount',
        'cast(delivery_fee as decimal(12, 2)) as delivery_fee',
        'cast(created_at as timestamp) as created_at',
        'cast(promised_at as timestamp) as promised_at',
        'cast(delivered_at as timestamp) as delivered_at',
        'cast(updated_at as timestamp) as updated_at',
    ] + added_columns,
) }}
