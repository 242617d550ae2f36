{#- Staging runs stay proportional to the processed hours, not to the history.

    Every copy of an event carries the same event time (it is part of the change the connector re-delivers), so the
    staged rows an incremental run can touch lie inside the event-time range of the copies it merges. Staging tables
    are written in event-time order, and a filter on that range written as constants lets DuckDB skip whole row
    groups by their min/max instead of probing every staged _event_id. If two different lines ever claimed one
    identity with different event times, the unique test on _event_id fails the build: nothing is dropped silently. -#}

{#- (min, max) event time of the rows of `relation` that match `where`, as timestamp literals; none if no rows. -#}
{% macro event_time_bounds(relation, where='true') -%}
    {%- if not execute -%}{{ return(none) }}{%- endif -%}
    {%- set result = run_query(
        'select cast(min(_event_time) as string), cast(max(_event_time) as string) from ' ~ relation
        ~ ' where ' ~ where) -%}
    {%- set row = result.rows[0] -%}
    {%- if row[0] is none -%}{{ return(none) }}{%- endif -%}
    {{ return(("timestamp '" ~ row[0] ~ "'", "timestamp '" ~ row[1] ~ "'")) }}
{%- endmacro %}

{#- SQL predicate: `_event_time` inside `bounds` (false when there are none). -#}
{% macro within_event_time(bounds) -%}
    {%- if bounds is none -%}false{%- else -%}_event_time between {{ bounds[0] }} and {{ bounds[1] }}{%- endif -%}
{%- endmacro %}

{#- Incremental strategy `event_merge` (staging): replace the rows of the merged events that changed, keep event-time
    order. Like delete+insert on _event_id, with the delete limited to the event-time range of the new rows, and
    without rewriting a row the merge left as it was: every run re-reads the lookback hour, whose events are almost
    all staged already and come out of the merge unchanged. Rewriting them would delete and re-insert an hour of rows
    per model and run (write-ahead log, and deleted rows for DuckDB's checkpoint to compact). _staged_by names the
    run that last changed a row. -#}
{% macro get_incremental_event_merge_sql(arg_dict) -%}
    {%- set target = arg_dict['target_relation'] -%}
    {%- set source = arg_dict['temp_relation'] -%}
    {%- set names = arg_dict['dest_columns'] | map(attribute='name') | list -%}
    {%- set columns = get_quoted_csv(names) -%}
    {%- set compared = get_quoted_csv(names | reject('equalto', '_staged_by') | list) -%}
    {%- set bounds = event_time_bounds(source) -%}
    {#- The new rows are dbt's temporary table for this run: drop from them the events staged exactly as they are. -#}
    delete from {{ source }}
    where _event_id in (
        select _event_id from (
            select {{ compared }} from {{ source }}
            intersect
            select {{ compared }} from {{ target }} where {{ within_event_time(bounds) }}
        )
    );

    delete from {{ target }}
    where {{ within_event_time(bounds) }} and _event_id in (select _event_id from {{ source }});

    insert into {{ target }} ({{ columns }})
    select {{ columns }} from {{ source }} order by _event_time
{%- endmacro %}

{#- Spark: the same replacement as one Iceberg MERGE on _event_id, inside the event-time range of the new rows; rows
    whose compared columns are all equal (null-safe) are left as they are. dbt-spark's new rows are a temporary view,
    so they cannot be deleted from; the MERGE's matched condition skips them instead. -#}
{% macro spark__get_incremental_event_merge_sql(arg_dict) -%}
    {%- set target = arg_dict['target_relation'] -%}
    {%- set source = arg_dict['temp_relation'] -%}
    {%- set names = adapter.get_columns_in_relation(target) | map(attribute='name') | list -%}
    {%- set compared = names | reject('equalto', '_staged_by') | list -%}
    {%- set bounds = event_time_bounds(source) -%}
    merge into {{ target }} as staged
    using {{ source }} as merged
    on staged._event_id = merged._event_id
        and {% if bounds is none %}false{% else %}staged._event_time between {{ bounds[0] }} and {{ bounds[1] }}{% endif %}
    when matched and not (
        {%- for name in compared %}
        staged.{{ name }} <=> merged.{{ name }}{{ ' and' if not loop.last }}
        {%- endfor %}
    ) then update set *
    when not matched then insert *
{%- endmacro %}
