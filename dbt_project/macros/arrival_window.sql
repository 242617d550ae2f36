{#- The arrival-hour window an incremental run processes.

    vars min_arrival_hour / max_arrival_hour (inclusive hour starts, 'YYYY-MM-DD HH:MM:SS') give the window; the env
    vars LOGISTICS_DBT_MIN_ARRIVAL_HOUR / LOGISTICS_DBT_MAX_ARRIVAL_HOUR are read when the vars are not set. Dagster
    and the platform's runner use the env form: any change of --vars makes dbt re-parse the whole project (seconds on
    every hourly run), an env var read only at run time does not.
    lookback_hours more hours before the window are re-read (a delayed file dropped into a recent hour folder).
    Without vars (a plain `dbt build` on an existing database) the window is the newest staged arrival hour minus the
    lookback: the high-water mark of `hwm_relation`. Re-processing any window is idempotent by construction. -#}

{% macro arrival_window_value(name) -%}
    {%- set value = var(name, none) -%}
    {#- Only at execution: an env var read while parsing is recorded, and its next value would re-parse models. -#}
    {%- if not value and execute -%}
        {%- set value = env_var('LOGISTICS_DBT_' ~ (name | upper), '') -%}
    {%- endif -%}
    {{- return(value or none) -}}
{%- endmacro %}

{% macro arrival_lower_bound(hwm_relation) -%}
    {%- set lookback = var('lookback_hours', 1) | int -%}
    {%- set first_hour = arrival_window_value('min_arrival_hour') -%}
    {%- if first_hour -%}
        (timestamp '{{ first_hour }}' - interval {{ lookback }} hour)
    {%- else -%}
        (select coalesce(max(_arrival_hour), timestamp '1970-01-01') - interval {{ lookback }} hour from {{ hwm_relation }})
    {%- endif -%}
{%- endmacro %}

{% macro arrival_upper_bound() -%}
    {%- set last_hour = arrival_window_value('max_arrival_hour') -%}
    {%- if last_hour -%}
        timestamp '{{ last_hour }}'
    {%- else -%}
        timestamp '9999-12-31 00:00:00'
    {%- endif -%}
{%- endmacro %}

{% macro in_arrival_window(column, hwm_relation) -%}
    {{ column }} between {{ arrival_lower_bound(hwm_relation) }} and {{ arrival_upper_bound() }}
{%- endmacro %}

{#- Event-time windows an operator asked to recompute (late-event folds), as a select of window_start. -#}
{% macro refresh_windows() -%}
    {%- set starts = var('refresh_window_starts', []) -%}
    {%- if starts is string -%}{%- set starts = [starts] -%}{%- endif -%}
    {%- if starts | length > 0 -%}
        select cast(window_start as timestamp) as window_start
        from (values {% for s in starts %}('{{ s }}'){{ "," if not loop.last }}{% endfor %}) as requested(window_start)
    {%- else -%}
        select cast(null as timestamp) as window_start where false
    {%- endif -%}
{%- endmacro %}
