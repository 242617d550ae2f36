-- SLA windows that may have changed with the affected orders. Deliveries: the windows any version of an affected order
-- was delivered in (old and new contributions). Overdue orders: an order's changes decide its state at window ends
-- after their event time only, so every window from the affected orders' earliest event time on (is_open_ended; this
-- also covers windows the run adds at either end of the range).
with affected_changes as (
    select orders.delivered_at, orders._event_time
    from {{ ref('stg_orders') }} as orders
    inner join {{ ref('int_affected_order_ids') }} as affected
        on orders.order_id = affected.order_id
),

marked as (
    select {{ sla_window('delivered_at') }} as window_start, false as is_open_ended
    from affected_changes
    where delivered_at is not null
    union all
    select {{ sla_window('min(_event_time)') }} as window_start, true as is_open_ended
    from affected_changes
    having count(*) > 0
)

select window_start, bool_or(is_open_ended) as is_open_ended
from marked
group by window_start
