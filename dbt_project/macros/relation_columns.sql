{#- Column names of a table or view, in order, from DuckDB's catalog (empty while parsing, and for a relation that
    does not exist, like the CTE a unit test puts in place of a source).

    Unlike adapter.get_columns_in_relation (a `describe`), this does not bind the relation: for the bronze views that
    would plan an Iceberg scan, reading the table's manifests, once more per model and run. -#}
{% macro relation_column_names(relation) -%}
    {{ return(adapter.dispatch('relation_column_names')(relation)) }}
{%- endmacro %}

{#- Spark: a describe of an Iceberg table reads its metadata file only. -#}
{% macro spark__relation_column_names(relation) -%}
    {%- if not execute -%}{{ return([]) }}{%- endif -%}
    {{ return(adapter.get_columns_in_relation(relation) | map(attribute='name') | list) }}
{%- endmacro %}

{% macro duckdb__relation_column_names(relation) -%}
    {%- if not execute -%}{{ return([]) }}{%- endif -%}
    {%- set result = run_query(
        "select column_name from information_schema.columns"
        ~ " where table_catalog = '" ~ relation.database ~ "' and table_schema = '" ~ relation.schema ~ "'"
        ~ " and table_name = '" ~ relation.identifier ~ "' order by ordinal_position") -%}
    {{ return(result.columns[0].values() | list) }}
{%- endmacro %}

{#- The type of a decimal column of a bronze relation, for staging's cast: the contract's `contract_type` until bronze
    promotes the column to more digits (docs/contract/sources.md, "Types that widen"), then bronze's own, so a value
    the source widened never overflows staging. -#}
{% macro bronze_decimal(relation, column, contract_type) -%}
    {{ return(adapter.dispatch('bronze_decimal')(relation, column, contract_type)) }}
{%- endmacro %}

{#- Spark: the contract's type (the DuckDB target is the one that follows promotions). -#}
{% macro default__bronze_decimal(relation, column, contract_type) -%}
    {{ return(contract_type) }}
{%- endmacro %}

{% macro duckdb__bronze_decimal(relation, column, contract_type) -%}
    {%- if not execute -%}{{ return(contract_type) }}{%- endif -%}
    {%- set result = run_query(
        "select lower(data_type) from information_schema.columns"
        ~ " where table_catalog = '" ~ relation.database ~ "' and table_schema = '" ~ relation.schema ~ "'"
        ~ " and table_name = '" ~ relation.identifier ~ "' and column_name = '" ~ column ~ "'") -%}
    {%- set found = result.columns[0].values() | list -%}
    {{ return(found[0] if found and found[0].startswith('decimal(') else contract_type) }}
{%- endmacro %}
