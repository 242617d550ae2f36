{#- The start of history: where a tenant version known only from an initial snapshot (`op = 'r'` as the key's first
    event) is valid from, since the platform did not see the key's earlier changes (docs/contract/marts.md,
    dim_tenant). A fixed instant rather than the earliest event time seen so far, which would move as late data
    arrives (incremental = full refresh, in any order); the Unix epoch rather than a smaller one, because readers
    that hold timestamps in nanoseconds (pandas) stop at 1677. -#}
{% macro start_of_history() -%}
    timestamp '1970-01-01 00:00:00'
{%- endmacro %}
