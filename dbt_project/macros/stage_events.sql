{#- One row per event identity (_event_id) from the bronze copies of one topic.

    Copies of one event (connector redeliveries, at other offsets and arrival hours) collapse deterministically to
    the copy that arrived first (then lowest partition/offset): its address, arrival hour and lateness are kept.
    The event is on time if ANY copy is (bool_and over _is_late). On incremental runs the copies of the processed
    arrival window are merged with the row already staged for the same _event_id, and min/bool_and are idempotent
    and order-independent, so hours can be processed in any order and re-run any number of times.

    columns: list of "<expression> as <name>" strings for the typed row columns. -#}
{% macro stage_events(source_relation, columns, cdc=true) -%}
{%- set metadata = [
    '_topic', '_kafka_partition', '_offset', '_source_file', '_event_id', '_event_time', '_arrival_hour',
    '_is_late', '_lateness_seconds'] + (['_op', '_lsn', '_tx_id', '_connector_ts'] if cdc else []) -%}
with landed_copies as (
    select
        {% for c in columns %}{{ c }},
        {% endfor -%}
        {{ metadata | join(',\n        ') }}
    from {{ source_relation }}
    {% if is_incremental() -%}
    where {{ in_arrival_window('_arrival_hour', this) }}
    {%- endif %}
),

{% if is_incremental() -%}
{%- set landed_bounds = event_time_bounds(
    source_relation, in_arrival_window('_arrival_hour', this)) if execute else none -%}
already_staged_copies as (
    select * exclude (_staged_by)
    from {{ this }}
    where {{ within_event_time(landed_bounds) }}
        and _event_id in (select _event_id from landed_copies)
),

all_copies as (
    select * from landed_copies
    union all by name
    select * from already_staged_copies
),
{%- else -%}
all_copies as (
    select * from landed_copies
),
{%- endif %}

ranked_copies as (
    select
        *,
        bool_and(_is_late) over (partition by _event_id) as _is_late_everywhere,
        row_number() over (
            partition by _event_id order by _arrival_hour, _kafka_partition, _offset, _source_file
        ) as copy_rank
    from all_copies
)

select
    * exclude (copy_rank, _is_late, _is_late_everywhere),
    _is_late_everywhere as _is_late,
    '{{ invocation_id }}' as _staged_by
from ranked_copies
where copy_rank = 1
{#- Event-time order keeps the zone maps of staging useful to the incremental lookups (see event_merge.sql). #}
order by _event_time
{%- endmacro %}
