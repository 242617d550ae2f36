-- The orders with a staged event arriving in the run's window (lookback included), and the orders that a truncate
-- arriving in the window ends (a change before it): their readers drop or close them (int_truncates).
select order_id
from {{ ref('stg_orders') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_orders')) }}
union
select order_id
from {{ ref('stg_orders') }}
where _lsn < (
    select max(truncate_lsn)
    from {{ ref('int_truncates') }}
    where table_name = 'orders' and {{ in_arrival_window('arrival_hour', ref('stg_orders')) }}
)
