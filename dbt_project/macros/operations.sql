{#- Settings of the operations marts (marts.md, "Operations marts"). settings.py declares them and their defaults,
    and settings.dbt_env() puts them in the environment of every dbt process: no defaults here, a dbt run without
    them fails naming the variable. A changed value applies to the windows built from then on: a full refresh
    applies it to the history. -#}

{% macro sla_window_minutes() -%}{{ return(env_var('SLA_WINDOW_MINUTES') | int) }}{%- endmacro %}
{% macro sla_min_deliveries() -%}{{ return(env_var('SLA_MIN_DELIVERIES') | int) }}{%- endmacro %}
{% macro sla_late_share_max() -%}{{ return(env_var('SLA_LATE_SHARE_MAX')) }}{%- endmacro %}
{% macro gps_jump_kmh() -%}{{ return(env_var('GPS_JUMP_KMH')) }}{%- endmacro %}

{#- The SLA window holding `ts`: a UTC bucket of SLA_WINDOW_MINUTES aligned to the hour (the width divides 60,
    settings.py enforces it; DuckDB's default bucket origin is a midnight). -#}
{% macro sla_window(ts) -%}
    {{ minute_bucket(sla_window_minutes(), ts) }}
{%- endmacro %}

{#- Predicate: SLA window `window_start` may have changed with the order changes of the processed arrival window.
    Deliveries: the windows any version of a touched order was delivered in (old and new contributions). Overdue
    orders: an order's changes decide its state at window ends after their event time only, so every window from
    the touched orders' earliest event time on (this also covers windows the run adds at either end). -#}
{% macro sla_window_affected(window_start) -%}
    (
        {{ window_start }} >= (
            select {{ sla_window('min(_event_time)') }} from {{ ref('stg_orders') }}
            where order_id in ({{ affected_order_ids() }})
        )
        or {{ window_start }} in (
            select distinct {{ sla_window('delivered_at') }} from {{ ref('stg_orders') }}
            where order_id in ({{ affected_order_ids() }}) and delivered_at is not null
        )
    )
{%- endmacro %}

{#- Delivery dates whose rows of fct_region_delivery_daily may have changed: the dates any version of a touched
    order was delivered on, and the 7 dates after each (their baseline holds it). -#}
{% macro affected_delivery_dates() -%}
    select distinct cast(touched.delivery_date + shift.days as date) as delivery_date
    from (
        select distinct cast(delivered_at as date) as delivery_date from {{ ref('stg_orders') }}
        where order_id in ({{ affected_order_ids() }}) and delivered_at is not null
    ) as touched
    cross join (values (0), (1), (2), (3), (4), (5), (6), (7)) as shift(days)
{%- endmacro %}

{#- Per courier with pings in the processed arrival window: the earliest recorded_at among them. Only pairs whose
    later ping is at or after it can have changed. -#}
{% macro affected_ping_bounds() -%}
    select courier_id, min(recorded_at) as changed_from
    from {{ ref('stg_tracking_pings') }}
    where {{ in_arrival_window('_arrival_hour', ref('stg_tracking_pings')) }}
    group by courier_id
{%- endmacro %}
