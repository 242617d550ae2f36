{#- Where DuckDB's and Spark SQL's dialects differ, the models call one of these; each dispatches per adapter
    (`duckdb__...`, `spark__...`). What both engines share stays written out in the models. -#}

{#- Microseconds since the epoch of a timestamp (without time zone). -#}
{% macro epoch_us(ts) -%}{{ return(adapter.dispatch('epoch_us')(ts)) }}{%- endmacro %}
{% macro duckdb__epoch_us(ts) -%}epoch_us({{ ts }}){%- endmacro %}
{#- Spark: the session time zone is UTC (lib/transform/spark.py), so the cast to a zoned timestamp shifts nothing. -#}
{% macro spark__epoch_us(ts) -%}unix_micros(cast({{ ts }} as timestamp_ltz)){%- endmacro %}

{#- Whole seconds from `start` to `end`, as date_diff('second', ...) counts them (boundaries crossed). -#}
{% macro seconds_between(start, end) -%}{{ return(adapter.dispatch('seconds_between')(start, end)) }}{%- endmacro %}
{% macro duckdb__seconds_between(start, end) -%}date_diff('second', {{ start }}, {{ end }}){%- endmacro %}
{% macro spark__seconds_between(start, end) -%}
    (floor({{ epoch_us(end) }} / 1000000) - floor({{ epoch_us(start) }} / 1000000))
{%- endmacro %}

{#- Integer division. -#}
{% macro int_div(a, b) -%}{{ return(adapter.dispatch('int_div')(a, b)) }}{%- endmacro %}
{% macro duckdb__int_div(a, b) -%}({{ a }}) // ({{ b }}){%- endmacro %}
{% macro spark__int_div(a, b) -%}({{ a }}) div ({{ b }}){%- endmacro %}

{#- The bucket of `minutes` minutes (a divisor of 60) holding `ts`, aligned to the hour (and so to midnight). -#}
{% macro minute_bucket(minutes, ts) -%}{{ return(adapter.dispatch('minute_bucket')(minutes, ts)) }}{%- endmacro %}
{% macro duckdb__minute_bucket(minutes, ts) -%}time_bucket(interval {{ minutes }} minute, {{ ts }}){%- endmacro %}
{% macro spark__minute_bucket(minutes, ts) -%}
    cast(timestamp_micros({{ int_div(epoch_us(ts), minutes * 60000000) }} * {{ minutes * 60000000 }}) as timestamp)
{%- endmacro %}

{#- One row per timestamp from `first` to `last` every `minutes` minutes, as a select list item named `name`. -#}
{% macro unnest_timestamp_series(first, last, minutes, name) -%}
    {{ return(adapter.dispatch('unnest_timestamp_series')(first, last, minutes, name)) }}
{%- endmacro %}
{% macro duckdb__unnest_timestamp_series(first, last, minutes, name) -%}
    unnest(generate_series({{ first }}, {{ last }}, interval {{ minutes }} minute)) as {{ name }}
{%- endmacro %}
{% macro spark__unnest_timestamp_series(first, last, minutes, name) -%}
    explode(sequence({{ first }}, {{ last }}, interval {{ minutes }} minute)) as {{ name }}
{%- endmacro %}

{#- The value of `value` on the last row of window `window` where `condition` held, null when none did. A real null
    on that row is carried too: the value travels in a one-field struct, and only a missing struct is skipped. -#}
{% macro last_value_where(value, condition, window) -%}
    {{ return(adapter.dispatch('last_value_where')(value, condition, window)) }}
{%- endmacro %}
{% macro duckdb__last_value_where(value, condition, window) -%}
    (last_value(case when {{ condition }} then {'v': {{ value }}} end ignore nulls) over {{ window }}).v
{%- endmacro %}
{% macro spark__last_value_where(value, condition, window) -%}
    (last_value(case when {{ condition }} then named_struct('v', {{ value }}) end, true) over {{ window }}).v
{%- endmacro %}

{#- avg and stddev_samp with the rows in `order` order: the same float operations on every build (DuckDB's ordered
    aggregates). Spark has none: there the group's rows are few and come in one task. -#}
{% macro ordered_avg(value, order) -%}{{ return(adapter.dispatch('ordered_avg')(value, order)) }}{%- endmacro %}
{% macro duckdb__ordered_avg(value, order) -%}avg({{ value }} order by {{ order }}){%- endmacro %}
{% macro spark__ordered_avg(value, order) -%}avg({{ value }}){%- endmacro %}
{% macro ordered_stddev_samp(value, order) -%}
    {{ return(adapter.dispatch('ordered_stddev_samp')(value, order)) }}
{%- endmacro %}
{% macro duckdb__ordered_stddev_samp(value, order) -%}stddev_samp({{ value }} order by {{ order }}){%- endmacro %}
{% macro spark__ordered_stddev_samp(value, order) -%}stddev_samp({{ value }}){%- endmacro %}

{#- Delete from `target` the rows matching a row of the select `affected` on `condition` (aliases `target` and
    `affected`). Spark: an Iceberg MERGE ... WHEN MATCHED THEN DELETE (its DELETE with a correlated EXISTS and a
    range condition fails to plan). -#}
{% macro delete_matching(target, affected, condition) -%}
    {{ return(adapter.dispatch('delete_matching')(target, affected, condition)) }}
{%- endmacro %}
{% macro duckdb__delete_matching(target, affected, condition) -%}
    delete from {{ target }} as target using ({{ affected }}) as affected where {{ condition }}
{%- endmacro %}
{% macro spark__delete_matching(target, affected, condition) -%}
    merge into {{ target }} as target using ({{ affected }}) as affected on {{ condition }} when matched then delete
{%- endmacro %}

{#- Every column but `columns`, as a select list item. Spark SQL has no `* exclude`: a quoted regular expression
    (spark.sql.parser.quotedRegexColumnNames, set in lib/transform/spark.py). -#}
{% macro star_except(columns) -%}{{ return(adapter.dispatch('star_except')(columns)) }}{%- endmacro %}
{% macro duckdb__star_except(columns) -%}* exclude ({{ columns | join(', ') }}){%- endmacro %}
{% macro spark__star_except(columns) -%}`(?!({{ columns | join('|') }})$).+`{%- endmacro %}

{#- The rows of CTEs `left` and `right`, columns matched by name. Spark SQL has no `union all by name`: there both
    sides select the columns of the relation `columns_of` but `except_columns`, in its order. -#}
{% macro union_all_by_name(left, right, columns_of, except_columns) -%}
    {{ return(adapter.dispatch('union_all_by_name')(left, right, columns_of, except_columns)) }}
{%- endmacro %}
{% macro duckdb__union_all_by_name(left, right, columns_of, except_columns) -%}
    select * from {{ left }} union all by name select * from {{ right }}
{%- endmacro %}
{% macro spark__union_all_by_name(left, right, columns_of, except_columns) -%}
    {%- set columns = relation_column_names(columns_of) | reject('in', except_columns) | join(', ') -%}
    select {{ columns }} from {{ left }} union all select {{ columns }} from {{ right }}
{%- endmacro %}
