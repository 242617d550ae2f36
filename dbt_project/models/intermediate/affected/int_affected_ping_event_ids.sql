-- The pings staged with an arrival hour in the run's window (lookback included): one staged row per event.
select _event_id as event_id
from {{ ref('stg_tracking_pings') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_tracking_pings')) }}
