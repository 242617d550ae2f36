{#- The rows of CTE `events` that a windowed mart counts: on-time events, and the late events of a window an operator
    folded back in (`logistics-platform late fold`, recorded in ops.folded_windows for `topic`). late_events lists
    exactly the rows this leaves out. `events` needs the columns window_start and _is_late. -#}
{% macro counted_in_window(events, topic) -%}
    select {{ events }}.*
    from {{ events }}
    left join (
        select window_start from {{ ref('stg_folded_windows') }} where topic = '{{ topic }}'
    ) as folded_windows
        on {{ events }}.window_start = folded_windows.window_start
    where not {{ events }}._is_late or folded_windows.window_start is not null
{%- endmacro %}
