{#- One row per event identity (_event_id) from the typed copies of one topic (CTE `copies` of a staging model).

    Copies of one event (connector redeliveries, at other offsets and arrival hours) collapse deterministically to
    the copy that arrived first (then lowest partition/offset): its address, arrival hour and lateness are kept.
    The event is on time if ANY copy is (bool_and over _is_late). On incremental runs `copies` holds the bronze copies
    of the processed arrival window; they are merged with the row already staged for the same _event_id, and
    min/bool_and are idempotent and order-independent, so hours can be processed in any order and re-run any number
    of times.

    source_relation: the bronze table `copies` reads, for the event-time range of the window's copies (the staged
    rows of those events lie inside it; see event_merge.sql). The result carries `copies`' columns in their order,
    _is_late last but one, then _staged_by (the run that staged the row). -#}
{% macro first_arrived_copies(copies, source_relation) -%}
    {{ return(adapter.dispatch('first_arrived_copies')(copies, source_relation)) }}
{%- endmacro %}

{% macro duckdb__first_arrived_copies(copies, source_relation) -%}
{%- if is_incremental() -%}
{%- set window_bounds = event_time_bounds(source_relation, in_arrival_window('_arrival_hour', this)) -%}
{%- endif -%}
    select
        * exclude (copy_rank, _is_late, _is_late_everywhere),
        _is_late_everywhere as _is_late,
        '{{ invocation_id }}' as _staged_by
    from (
        select
            *,
            bool_and(_is_late) over (partition by _event_id) as _is_late_everywhere,
            row_number() over (
                partition by _event_id order by _arrival_hour, _kafka_partition, _offset, _source_file
            ) as copy_rank
        from (
            select * from {{ copies }}
            {%- if is_incremental() %}
            union all by name
            select * exclude (_staged_by)
            from {{ this }}
            where {{ within_event_time(window_bounds) }}
                and _event_id in (select _event_id from {{ copies }})
            {%- endif %}
        ) as landed_and_staged_copies
    ) as ranked_copies
    where copy_rank = 1
{%- endmacro %}

{#- Spark SQL has neither `* exclude` nor `union all by name`. The staged table's columns (on incremental runs) name
    the columns both sides of the union select; the outer select drops the helper columns with a quoted regular
    expression (spark.sql.parser.quotedRegexColumnNames, set in lib/transform/spark.py). -#}
{% macro spark__first_arrived_copies(copies, source_relation) -%}
{%- if is_incremental() -%}
{%- set window_bounds = event_time_bounds(source_relation, in_arrival_window('_arrival_hour', this)) -%}
{%- set staged = adapter.get_columns_in_relation(this) | map(attribute='name') | reject('equalto', '_staged_by') | list -%}
{%- endif %}
    select
        `(?!(copy_rank|_is_late|_is_late_everywhere)$).+`,
        _is_late_everywhere as _is_late,
        '{{ invocation_id }}' as _staged_by
    from (
        select
            *,
            bool_and(_is_late) over (partition by _event_id) as _is_late_everywhere,
            row_number() over (
                partition by _event_id order by _arrival_hour, _kafka_partition, _offset, _source_file
            ) as copy_rank
        from (
            {%- if is_incremental() %}
            select {{ staged | join(', ') }} from {{ copies }}
            union all
            select {{ staged | join(', ') }}
            from {{ this }}
            where {{ within_event_time(window_bounds) }}
                and _event_id in (select _event_id from {{ copies }})
            {%- else %}
            select * from {{ copies }}
            {%- endif %}
        ) as landed_and_staged_copies
    ) as ranked_copies
    where copy_rank = 1
{%- endmacro %}
