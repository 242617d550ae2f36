{#- Generic tests we would otherwise take from a package (no `dbt deps` here). -#}

{% test unique_combination_of_columns(model, combination_of_columns) %}
select {{ combination_of_columns | join(', ') }}, count(*) as copies
from {{ model }}
group by {{ combination_of_columns | join(', ') }}
having count(*) > 1
{% endtest %}

{% test expression_is_true(model, expression, column_name=none) %}
select * from {{ model }} where not ({{ expression }})
{% endtest %}

{#- A model's required columns in one test and one scan, where a not_null test per column would be a dbt node and a
    scan each: one row per listed column that holds nulls, with how many (it fails naming the columns). Sums of a
    CASE, not count_if or FILTER, so that DuckDB and Spark run it alike. -#}
{% test columns_not_null(model, columns) %}
with null_counts as (
    select
    {%- for column in columns %}
        sum(case when {{ column }} is null then 1 else 0 end) as nulls_{{ loop.index }}{{ "," if not loop.last }}
    {%- endfor %}
    from {{ model }}
)
{%- for column in columns %}
select '{{ column }}' as column_name, nulls_{{ loop.index }} as null_rows from null_counts where nulls_{{ loop.index }} > 0
{{ "union all" if not loop.last }}
{%- endfor %}
{% endtest %}
