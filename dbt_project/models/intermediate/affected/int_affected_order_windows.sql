-- Every event-time hour an affected order has an event in: its old and its new contributions both live there,
-- because staging only ever gains events. Plus the windows an operator asked to refresh (late fold).
select distinct order_events.window_start
from {{ ref('int_order_events') }} as order_events
inner join {{ ref('int_affected_order_ids') }} as affected
    on order_events.order_id = affected.order_id
union
select window_start from ({{ refresh_windows() }}) as requested
