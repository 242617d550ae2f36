-- The tenants with a staged event arriving in the run's window (lookback included).
select distinct tenant_id
from {{ ref('stg_tenants') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_tenants')) }}
