-- The tenants with a staged event arriving in the run's window (lookback included), and the earliest event time of
-- those events: a tier valid at a delivery can only have changed from then on.
select tenant_id, min(_event_time) as first_changed_at
from {{ ref('stg_tenants') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_tenants')) }}
group by tenant_id
