{#- The arrival-hour window an incremental run processes.

    Dagster passes vars min_arrival_hour / max_arrival_hour (inclusive hour starts) for the partition range it runs;
    lookback_hours more hours before the window are re-read (a delayed file dropped into a recent hour folder).
    Without vars (a plain `dbt build` on an existing database) the window is the newest staged arrival hour minus the
    lookback: the high-water mark of `hwm_relation`. Re-processing any window is idempotent by construction. -#}

{% macro arrival_lower_bound(hwm_relation) -%}
    {%- set lookback = var('lookback_hours', 1) | int -%}
    {%- if var('min_arrival_hour', none) -%}
        (timestamp '{{ var("min_arrival_hour") }}' - interval {{ lookback }} hour)
    {%- else -%}
        (select coalesce(max(_arrival_hour), timestamp '1970-01-01') - interval {{ lookback }} hour from {{ hwm_relation }})
    {%- endif -%}
{%- endmacro %}

{% macro arrival_upper_bound() -%}
    {%- if var('max_arrival_hour', none) -%}
        timestamp '{{ var("max_arrival_hour") }}'
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
