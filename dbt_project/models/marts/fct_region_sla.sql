{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="
        {% if is_incremental() %}
        delete from {{ this }}
        where window_start >= (select min(window_start) from {{ ref('int_affected_sla_windows') }} where is_open_ended)
            or window_start in (select window_start from {{ ref('int_affected_sla_windows') }})
        {% else %}select 1{% endif %}",
) }}
{%- set width = sla_window_minutes() %}
-- Read in the incremental branch only.
{%- set affected_sla_windows = ref('int_affected_sla_windows') %}
{%- set orders_current = ref('int_orders_current') %}

-- Windows run from the one holding the earliest order event time to the one holding the latest.
with window_range as (
    select
        {{ sla_window('min(_event_time)') }} as first_window,
        {{ sla_window('max(_event_time)') }} as last_window
    from {{ ref('stg_orders') }}
),

windows as (
    select window_start, window_start + interval {{ width }} minute as window_end
    from (
        select {{ unnest_timestamp_series('first_window', 'last_window', width, 'window_start') }}
        from window_range
    ) as all_windows
    {% if is_incremental() -%}
    -- The affected windows (int_affected_sla_windows says why), and every window on or after its open-ended one.
    where window_start >= (select min(window_start) from {{ affected_sla_windows }} where is_open_ended)
        or window_start in (select window_start from {{ affected_sla_windows }})
    {%- endif %}
),

delivered as (
    select
        {{ sla_window('delivered_at') }} as window_start,
        region,
        count(*) as deliveries,
        count(*) filter (where delivered_at > promised_at) as late_deliveries
    from {{ ref('fct_deliveries') }}
    {% if is_incremental() -%}
    where delivered_at >= (select min(window_start) from windows)
    {%- endif %}
    group by all
),

{% if is_incremental() -%}
-- The orders that can be open and overdue at the end of a rebuilt window: a state counts at a window end only while
-- no change with a higher lsn has an earlier event time, so such a state is either superseded by a change at or after
-- the first rebuilt window (the order has one) or the order's latest change (and then it is open now). The other
-- orders' changes cannot count, and their whole history need not be read.
candidate_orders as (
    select order_id
    from {{ ref('stg_orders') }}
    where _event_time >= (select min(window_start) from windows)
    union
    select order_id
    from {{ orders_current }}
    where not is_deleted and status not in ('delivered', 'cancelled') and promised_at is not null
    union
    -- Superseded by a truncate at or after the first rebuilt window (int_truncates).
    select order_id
    from {{ ref('stg_orders') }}
    where _lsn < (
        select max(truncate_lsn)
        from {{ ref('int_truncates') }}
        where table_name = 'orders' and truncated_at >= (select min(window_start) from windows)
    )
),
{%- endif %}

-- A change is an order's state at every window end after its event time up to the earliest event time of a change
-- with a higher lsn: then that one is later by lsn and also before the window end.
order_changes as (
    select
        order_id,
        region,
        status,
        promised_at,
        _op,
        _lsn,
        _event_time,
        min(_event_time) over (
            partition by order_id order by _lsn rows between 1 following and unbounded following
        ) as superseded_at
    from {{ ref('stg_orders') }}
    {% if is_incremental() -%}
    where order_id in (select order_id from candidate_orders)
    {%- endif %}
),

-- A truncate of orders after the change (int_truncates) supersedes it too, at the truncate's event time.
overdue_states as (
    select
        order_id,
        region,
        promised_at,
        _event_time,
        least(
            coalesce(superseded_at, timestamp '9999-12-31'),
            coalesce(
                (
                    select min(truncates.truncated_at)
                    from {{ ref('int_truncates') }} as truncates
                    where truncates.table_name = 'orders' and truncates.truncate_lsn > order_changes._lsn
                ),
                timestamp '9999-12-31'
            )
        ) as superseded_at
    from order_changes
    where _op != 'd' and status not in ('delivered', 'cancelled') and promised_at is not null
),

overdue as (
    select windows.window_start, overdue_states.region, count(distinct overdue_states.order_id) as overdue_open
    from windows
    inner join overdue_states
        on overdue_states._event_time < windows.window_end
        and overdue_states.superseded_at >= windows.window_end
        and overdue_states.promised_at < windows.window_end
    group by all
),

delivered_in_windows as (
    select delivered.*
    from delivered
    inner join windows on delivered.window_start = windows.window_start
),

combined as (
    select
        coalesce(delivered_in_windows.window_start, overdue.window_start) as window_start,
        coalesce(delivered_in_windows.region, overdue.region) as region,
        coalesce(delivered_in_windows.deliveries, 0) as deliveries,
        coalesce(delivered_in_windows.late_deliveries, 0) as late_deliveries,
        coalesce(overdue.overdue_open, 0) as overdue_open
    from delivered_in_windows
    full outer join overdue
        on delivered_in_windows.window_start = overdue.window_start
        and delivered_in_windows.region = overdue.region
),

-- late_share rounded half up to 4 places in integer arithmetic (basis points), so no binary fraction decides it.
shares as (
    select
        *,
        case
            when deliveries > 0
                then cast({{ int_div('20000 * late_deliveries + deliveries', '2 * deliveries') }} as decimal(9, 0)) * 0.0001
        end as late_share
    from combined
)

select
    cast(window_start as timestamp) as window_start,
    cast(region as string) as region,
    cast(deliveries as bigint) as deliveries,
    cast(late_deliveries as bigint) as late_deliveries,
    cast(late_share as decimal(5, 4)) as late_share,
    cast(overdue_open as bigint) as overdue_open,
    cast(
        coalesce(
            deliveries >= {{ sla_min_deliveries() }}
            and late_share > cast('{{ sla_late_share_max() }}' as decimal(18, 6)),
            false
        ) as boolean
    ) as breached
from shares
where deliveries > 0 or overdue_open > 0
