-- The payments with a staged event arriving in the run's window (lookback included).
select distinct payment_id
from {{ ref('stg_payments') }}
where {{ in_arrival_window('_arrival_hour', ref('stg_payments')) }}
