-- Per courier with pings in the run's window: the earliest recorded_at among them. Only GPS pairs whose later ping is
-- at or after it can have changed.
select courier_id, min(recorded_at) as changed_from
from {{ ref('stg_tracking_pings') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_tracking_pings')) }}
group by courier_id
