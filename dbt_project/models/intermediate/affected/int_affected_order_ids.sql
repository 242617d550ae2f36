-- The orders with a staged event arriving in the run's window (lookback included).
select distinct order_id
from {{ ref('stg_orders') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_orders')) }}
