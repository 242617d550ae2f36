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
{% macro off_route_km() -%}{{ return(env_var('OFF_ROUTE_KM')) }}{%- endmacro %}
{% macro off_route_minutes() -%}{{ return(env_var('OFF_ROUTE_MINUTES')) }}{%- endmacro %}
