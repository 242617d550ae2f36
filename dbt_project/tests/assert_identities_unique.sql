{{ config(meta={'dagster': {'ref': {'name': 'fct_orders'}}}) }}
-- Invariant 2: no event identity appears twice in staging; no key appears twice in a current-state mart.
with staged_identities as (
    select 'stg_orders' as relation, _event_id as identity from {{ ref('stg_orders') }}
    union all
    select 'stg_tenants', _event_id from {{ ref('stg_tenants') }}
    union all
    select 'stg_couriers', _event_id from {{ ref('stg_couriers') }}
    union all
    select 'stg_payments', _event_id from {{ ref('stg_payments') }}
    union all
    select 'stg_tracking_pings', _event_id from {{ ref('stg_tracking_pings') }}
),

current_state_keys as (
    select 'fct_orders' as relation, cast(order_id as string) as identity from {{ ref('fct_orders') }}
    union all
    select 'dim_courier', cast(courier_id as string) from {{ ref('dim_courier') }}
    union all
    select 'fct_deliveries', cast(order_id as string) from {{ ref('fct_deliveries') }}
    union all
    select 'dim_tenant (current)', tenant_id from {{ ref('dim_tenant') }} where is_current
),

all_identities as (
    select * from staged_identities
    union all
    select * from current_state_keys
)

select relation, identity, count(*) as occurrences
from all_identities
group by relation, identity
having count(*) > 1
