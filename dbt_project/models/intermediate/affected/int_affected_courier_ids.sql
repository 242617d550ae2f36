-- The couriers with a staged event arriving in the run's window (lookback included), and the couriers that a truncate
-- arriving in the window ends (a change before it): their readers drop or close them (int_truncates).
select courier_id
from {{ ref('stg_couriers') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_couriers')) }}
union
select courier_id
from {{ ref('stg_couriers') }}
where _lsn < (
    select max(truncate_lsn)
    from {{ ref('int_truncates') }}
    where table_name = 'couriers' and {{ in_arrival_window('arrival_hour', ref('stg_couriers')) }}
)
