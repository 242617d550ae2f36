{#- The operator's tables dbt reads as sources (ops.folded_windows). On DuckDB the dbt plugin creates them in the
    database file; on Spark they are Iceberg tables of the catalog, created empty here when missing (on-run-start). -#}
{% macro ensure_ops_tables() -%}{{ return(adapter.dispatch('ensure_ops_tables')()) }}{%- endmacro %}
{% macro default__ensure_ops_tables() -%}select 1{%- endmacro %}
{% macro spark__ensure_ops_tables() -%}
    {%- do run_query('create namespace if not exists ops') -%}
    create table if not exists ops.folded_windows (
        topic string not null, window_start timestamp not null, folded_at timestamp not null, folded_by string
    ) using iceberg
{%- endmacro %}
