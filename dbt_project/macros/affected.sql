{#- "Affected keys and windows": what the staging rows of the processed arrival hours can have changed.
    Each macro returns a select; a model deletes exactly that set in its pre-hook and re-inserts it recomputed from
    the FULL staging history of those keys / windows, so processing hours in any order equals a full refresh. -#}

{% macro affected_order_ids() -%}
    select distinct order_id from {{ ref('stg_orders') }}
    where {{ in_arrival_window('_arrival_hour', ref('stg_orders')) }}
{%- endmacro %}

{% macro affected_tenant_ids() -%}
    select distinct tenant_id from {{ ref('stg_tenants') }}
    where {{ in_arrival_window('_arrival_hour', ref('stg_tenants')) }}
{%- endmacro %}

{% macro affected_courier_ids() -%}
    select distinct courier_id from {{ ref('stg_couriers') }}
    where {{ in_arrival_window('_arrival_hour', ref('stg_couriers')) }}
{%- endmacro %}

{% macro affected_payment_ids() -%}
    select distinct payment_id from {{ ref('stg_payments') }}
    where {{ in_arrival_window('_arrival_hour', ref('stg_payments')) }}
{%- endmacro %}

{% macro affected_ping_event_ids() -%}
    select _event_id from {{ ref('stg_tracking_pings') }}
    where {{ in_arrival_window('_arrival_hour', ref('stg_tracking_pings')) }}
{%- endmacro %}

{#- Every event-time hour an affected order has an event in: its old and its new contributions both live there,
    because staging only ever gains events. Plus the windows an operator asked to refresh. -#}
{% macro affected_order_windows() -%}
    select distinct window_start from {{ ref('int_order_events') }}
    where order_id in ({{ affected_order_ids() }})
    union
    {{ refresh_windows() }}
{%- endmacro %}

{% macro affected_ping_windows() -%}
    select distinct date_trunc('hour', _event_time) as window_start from {{ ref('stg_tracking_pings') }}
    where {{ in_arrival_window('_arrival_hour', ref('stg_tracking_pings')) }}
    union
    {{ refresh_windows() }}
{%- endmacro %}

{#- (revenue_date, tenant_id) pairs: every date any version of an affected order was delivered on, for the tenant of
    that version; and, for tenants with new changes at event time T, every date on or after T with a delivery (the
    tier valid at delivered_at can only change from T on). -#}
{% macro affected_revenue_keys() -%}
    select distinct cast(delivered_at as date) as revenue_date, tenant_id
    from {{ ref('stg_orders') }}
    where order_id in ({{ affected_order_ids() }}) and delivered_at is not null and tenant_id is not null
    union
    select distinct cast(deliveries.delivered_at as date) as revenue_date, deliveries.tenant_id
    from {{ ref('fct_deliveries') }} as deliveries
    inner join (
        select tenant_id, min(_event_time) as changed_from
        from {{ ref('stg_tenants') }}
        where {{ in_arrival_window('_arrival_hour', ref('stg_tenants')) }}
        group by tenant_id
    ) as changed_tenants
        on deliveries.tenant_id = changed_tenants.tenant_id
        and deliveries.delivered_at >= changed_tenants.changed_from
{%- endmacro %}

{#- Pre-hook of the key-replacing incremental models: delete the affected keys (no-op on full refresh). -#}
{% macro delete_affected(key_column, affected_sql) -%}
    {%- if is_incremental() -%}
        delete from {{ this }} where {{ key_column }} in ({{ affected_sql }})
    {%- else -%}
        select 1
    {%- endif -%}
{%- endmacro %}
