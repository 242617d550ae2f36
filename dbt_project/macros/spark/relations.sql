{#- dbt-spark lists a schema's relations with `show table extended`, which Spark refuses for Iceberg (v2) tables, then
    falls back to `show tables in <schema>`; Iceberg's JdbcCatalog fails that on a namespace that does not exist yet
    (the first build in a catalog) with a message dbt-spark does not take for "schema not found". Listing a missing
    namespace lists nothing. -#}
{% macro list_relations_show_tables_without_caching(schema_relation) %}
    {% call statement('list_namespace', fetch_result=True) -%}
        show namespaces like '{{ schema_relation.schema }}'
    {%- endcall %}
    {% set sql -%}
        {%- if load_result('list_namespace').table | length > 0 -%}
            show tables in {{ schema_relation.schema }} like '*'
        {%- else -%}
            select cast(null as string) as namespace, cast(null as string) as tableName, false as isTemporary where false
        {%- endif -%}
    {%- endset %}
    {% call statement('list_relations_without_caching_show_tables', fetch_result=True) -%}{{ sql }}{%- endcall %}
    {% do return(load_result('list_relations_without_caching_show_tables').table) %}
{% endmacro %}
