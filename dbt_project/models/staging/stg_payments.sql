{{ config(materialized='incremental', incremental_strategy='event_merge', unique_key='_event_id') }}

{{ stage_events(
    source('bronze', 'payments'),
    columns=[
        'cast(payment_id as bigint) as payment_id',
        'cast(order_id as bigint) as order_id',
        'cast(amount as decimal(12, 2)) as amount',
        'cast(method as varchar) as method',
        'cast(status as varchar) as status',
        'cast(created_at as timestamp) as created_at',
        'cast(updated_at as timestamp) as updated_at',
    ],
) }}
