-- The couriers with a staged event arriving in the run's window (lookback included).
select distinct courier_id
from {{ ref('stg_couriers') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_couriers')) }}
