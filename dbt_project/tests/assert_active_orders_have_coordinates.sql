{{ config(severity='warn', meta={'dagster': {'ref': {'name': 'fct_courier_off_route'}}}) }}
-- The off-route monitor never guesses a route: an order active with a courier but without coordinates (its changes
-- made before the orders table had them) yields no episode. One row per such order: the warning's failure count is
-- how many active orders the monitor could not watch.
select order_id, count(*) as active_periods, min(valid_from) as first_active_at
from {{ ref('int_order_active_periods') }}
where pickup_lat is null or pickup_lon is null or dropoff_lat is null or dropoff_lon is null
group by order_id
