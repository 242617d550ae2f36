-- The (courier, order) pairs whose off-route episodes the run's arrival window can have changed: every pair of an
-- order with a change in the window (its periods come from its full history), and the pairs active at the
-- recorded_at of a ping in the window.
{%- set periods = ref('int_order_active_periods') %}
{%- set pings = ref('stg_tracking_pings') %}

select courier_id, order_id
from {{ periods }}
where order_id in (select order_id from {{ ref('int_affected_order_ids') }})

union

select periods.courier_id, periods.order_id
from {{ pings }} as pings
inner join {{ periods }} as periods
    on pings.courier_id = periods.courier_id
    and pings.recorded_at >= periods.valid_from
    and (periods.valid_to is null or pings.recorded_at < periods.valid_to)
where {{ in_arrival_window('pings._arrival_hour', pings) }}
