-- Every event-time hour a ping of the run's window falls in, plus the windows an operator asked to refresh.
select distinct date_trunc('hour', _event_time) as window_start
from {{ ref('stg_tracking_pings') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_tracking_pings')) }}
union
select window_start from ({{ refresh_windows() }}) as requested
