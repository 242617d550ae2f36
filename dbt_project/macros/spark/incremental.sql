{#- dbt-spark's incremental materialization knows a fixed list of strategies; ours (`event_merge`, staging) is added
    here, with its SQL from spark__get_incremental_event_merge_sql (event_merge.sql). These two macros replace
    dbt-spark's of the same names (a project's macros come first), so they also serve the strategies the project
    uses besides (`append`, and `merge` for Iceberg tables), with dbt-spark's SQL for them. -#}
{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}
    {%- if raw_strategy not in ['event_merge', 'append', 'merge'] or file_format != 'iceberg' -%}
        {%- do exceptions.raise_compiler_error(
            'this project runs incremental models on Spark as Iceberg tables with the strategies event_merge, '
            ~ 'append or merge, not ' ~ raw_strategy ~ ' on ' ~ file_format ~ ': set file_format=iceberg') -%}
    {%- endif -%}
    {%- do return(raw_strategy) -%}
{% endmacro %}

{% macro dbt_spark_get_incremental_sql(strategy, source, target, existing, unique_key, incremental_predicates) %}
    {%- if strategy == 'event_merge' -%}
        {{ spark__get_incremental_event_merge_sql({'target_relation': target, 'temp_relation': source}) }}
    {%- elif strategy == 'merge' -%}
        {{ get_merge_sql(target, source, unique_key, dest_columns=none, incremental_predicates=incremental_predicates) }}
    {%- else -%}
        {{ get_insert_into_sql(source, target) }}
    {%- endif -%}
{% endmacro %}
