{#- The on_schema_change comparison of an incremental run (our models use `fail`), with cheaper column lookups.

    dbt's version reads the columns of the new rows and of the target through adapter.get_columns_in_relation: each
    call builds a fresh macro context over every macro of the project and turns the DESCRIBE into an agate table,
    Python held under the GIL, twice per model, on every hourly run. The adapter's
    get_column_schema_from_query runs the same DESCRIBE and reads it straight from the cursor. The comparison itself
    is dbt's (diff_columns, diff_column_data_types). That call lists the fields of a struct column as columns of
    their own, so a relation with a struct column (a dot in a name) falls back to dbt's version. -#}
{% macro duckdb__check_for_schema_changes(source_relation, target_relation) %}
    {%- set source_columns = adapter.get_column_schema_from_query('select * from ' ~ source_relation) -%}
    {%- set target_columns = adapter.get_column_schema_from_query('select * from ' ~ target_relation) -%}
    {%- set dotted = [] -%}
    {%- for column in source_columns + target_columns if '.' in column.name -%}
        {%- do dotted.append(column.name) -%}
    {%- endfor -%}
    {%- if dotted | length > 0 -%}
        {{ return(dbt.default__check_for_schema_changes(source_relation, target_relation)) }}
    {%- endif -%}
    {%- set source_not_in_target = diff_columns(source_columns, target_columns) -%}
    {%- set target_not_in_source = diff_columns(target_columns, source_columns) -%}
    {%- set new_target_types = diff_column_data_types(source_columns, target_columns) -%}
    {%- set widened = widen_decimals(target_relation, source_columns, target_columns) -%}
    {%- set new_target_types = new_target_types | rejectattr('column_name', 'in', widened) | list -%}
    {%- set changed = (source_not_in_target + target_not_in_source + new_target_types) | length > 0 -%}
    {%- do log(
        'In ' ~ target_relation ~ ': schema changed: ' ~ changed ~ '; new columns: ' ~ source_not_in_target
        ~ '; columns gone: ' ~ target_not_in_source ~ '; new types: ' ~ new_target_types) -%}
    {{ return({
        'schema_changed': changed,
        'source_not_in_target': source_not_in_target,
        'target_not_in_source': target_not_in_source,
        'source_columns': source_columns,
        'target_columns': target_columns,
        'new_target_types': new_target_types,
    }) }}
{% endmacro %}

{#- A column type changed under an incremental model with on_schema_change sync_all_columns (stg_orders, after
    `run --accept-type`). dbt's version adds a column, copies, drops and renames: DuckDB then refuses the merge into the
    table in the same transaction ("another transaction has altered this table"). One ALTER ... TYPE, whose cast DuckDB
    makes itself, leaves the table writable. -#}
{% macro duckdb__alter_column_type(relation, column_name, new_column_type) %}
    {% call statement('alter_column_type') %}
        alter table {{ relation.render() }} alter column {{ adapter.quote(column_name) }} type {{ new_column_type }}
    {% endcall %}
{% endmacro %}

{#- A decimal widened at the same scale (a source column bronze promoted: docs/contract/sources.md, "Types that
    widen") is widened in the target in place, as Iceberg promotes bronze: no schema change to fail on. Returns the
    names of the columns of `relation` altered: those of `old_columns` that `new_columns` holds at more digits. -#}
{% macro widen_decimals(relation, new_columns, old_columns) -%}
    {%- set widened = [] -%}
    {%- for column in new_columns -%}
        {%- set match = old_columns | selectattr('name', 'equalto', column.name) | list -%}
        {%- set new = column.data_type | lower | replace(' ', '') -%}
        {%- set old = (match[0].data_type | lower | replace(' ', '')) if match else '' -%}
        {%- if old.startswith('decimal(') and new.startswith('decimal(') and old.split(',')[1] == new.split(',')[1]
                and (new[8:].split(',')[0] | int) > (old[8:].split(',')[0] | int) -%}
            {%- do run_query('alter table ' ~ relation ~ ' alter column ' ~ adapter.quote(column.name) ~ ' type ' ~ new) -%}
            {%- do widened.append(column.name) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(widened) }}
{%- endmacro %}

{#- Pre-hook (outside the transaction) of an incremental model whose other pre-hook deletes from it: the decimal
    columns `upstream` holds at more digits are widened first (widen_decimals), since DuckDB does not alter a table
    the same transaction already modified. -#}
{% macro widen_from(upstream) -%}
    {%- if execute and is_incremental() and target.type == 'duckdb' -%}
        {%- set ours = adapter.get_column_schema_from_query('select * from ' ~ this) -%}
        {%- do widen_decimals(this, adapter.get_column_schema_from_query('select * from ' ~ upstream), ours) -%}
    {%- endif -%}
    select 1
{%- endmacro %}
