{#- Schemas are literal: marts live in `marts` (the contract of docs/contract/marts.md), staging in `staging`, and so on.
    dbt's default would prefix the target schema (main_marts), which other tools must not have to know. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}
        {{ target.schema }}
    {%- else -%}
        {{ custom_schema_name | trim }}
    {%- endif -%}
{%- endmacro %}
