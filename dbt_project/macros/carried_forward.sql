{#- The carry-forward rule of the unchanged-TOAST placeholder, written once for every column that can carry it.

    Debezium sends a TOASTed value the change left untouched as a placeholder; staging nulls it and flags the row
    `<column>_unavailable` (docs/contract/sources.md). Its value is then the one of the entity's last earlier event
    that had one: the caller's window `earlier` (the entity's events before this one, in lsn order). A real null on
    that event is carried too (last_value_where). A macro rather than a model of carried-forward states: each reader
    already reads only the events of its affected keys, and a states table would write every staged change again. -#}
{% macro carried_forward(column) -%}
    case
        when {{ column }}_unavailable then {{ last_value_where(column, 'not ' ~ column ~ '_unavailable', 'earlier') }}
        else {{ column }}
    end
{%- endmacro %}
