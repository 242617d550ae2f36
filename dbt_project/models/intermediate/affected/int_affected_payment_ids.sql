-- The payments with a staged event arriving in the run's window (lookback included), and the payments that a truncate
-- arriving in the window ends (a change before it): their readers drop or close them (int_truncates).
select payment_id
from {{ ref('stg_payments') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_payments')) }}
union
select payment_id
from {{ ref('stg_payments') }}
where _lsn < (
    select max(truncate_lsn)
    from {{ ref('int_truncates') }}
    where table_name = 'payments' and {{ in_arrival_window('arrival_hour', ref('stg_payments')) }}
)
