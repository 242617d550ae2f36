-- The tenants with a staged event arriving in the run's window (lookback included), and the tenants that a truncate
-- arriving in the window ends (a change before it): their readers drop or close them (int_truncates).
select tenant_id
from {{ ref('stg_tenants') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_tenants')) }}
union
select tenant_id
from {{ ref('stg_tenants') }}
where _lsn < (
    select max(truncate_lsn)
    from {{ ref('int_truncates') }}
    where table_name = 'tenants' and {{ in_arrival_window('arrival_hour', ref('stg_tenants')) }}
)
