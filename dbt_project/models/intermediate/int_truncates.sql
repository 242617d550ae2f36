{{ config(materialized='table') }}
-- Every TRUNCATE of a CDC table, by its position: the current-state models drop the rows of the table whose last
-- change precedes it (int_orders_current, int_payments_current, int_couriers_current; int_tenant_versions closes the
-- open versions at its event time), and the affected sets send those keys through the incremental models.

select
    table_name,
    _lsn as truncate_lsn,
    _event_time as truncated_at,
    _arrival_hour as arrival_hour,
    _tx_id as tx_id,
    _event_id as truncate_id
from {{ ref('stg_truncates') }}
