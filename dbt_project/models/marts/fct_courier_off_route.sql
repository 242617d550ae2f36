{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="
        {% if is_incremental() %}
        {{ delete_matching(this, 'select * from ' ~ ref('int_affected_off_route_pairs'),
            'target.courier_id = affected.courier_id and target.order_id = affected.order_id') }}
        {% else %}select 1{% endif %}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_pairs = ref('int_affected_off_route_pairs') %}

with periods as (
    select periods.*
    from {{ ref('int_order_active_periods') }} as periods
    {% if is_incremental() -%}
    inner join {{ affected_pairs }} as affected
        on periods.courier_id = affected.courier_id and periods.order_id = affected.order_id
    {%- endif %}
),

-- A pair is still open while one of its periods has no end (the order is still active with the courier).
pairs as (
    select courier_id, order_id, bool_or(valid_to is null) as is_open
    from periods
    group by courier_id, order_id
),

-- The courier's pings while the order was active with it; orders without coordinates are left out (never guessed).
pair_pings as (
    select
        periods.courier_id,
        periods.order_id,
        periods.region,
        pings.ping_id,
        pings.recorded_at,
        -- On the plane tangent at the segment's mean latitude, in km from the pickup (mean earth radius 6371.0088 km):
        -- the ping (ping_x, ping_y) and the drop-off (drop_x, drop_y).
        (pings.lon - periods.pickup_lon) * cos(radians((periods.pickup_lat + periods.dropoff_lat) / 2))
            * 6371.0088 * pi() / 180 as ping_x,
        (pings.lat - periods.pickup_lat) * 6371.0088 * pi() / 180 as ping_y,
        (periods.dropoff_lon - periods.pickup_lon) * cos(radians((periods.pickup_lat + periods.dropoff_lat) / 2))
            * 6371.0088 * pi() / 180 as drop_x,
        (periods.dropoff_lat - periods.pickup_lat) * 6371.0088 * pi() / 180 as drop_y
    from periods
    inner join {{ ref('stg_tracking_pings') }} as pings
        on pings.courier_id = periods.courier_id
        and pings.recorded_at >= periods.valid_from
        and (periods.valid_to is null or pings.recorded_at < periods.valid_to)
    where periods.pickup_lat is not null and periods.pickup_lon is not null
        and periods.dropoff_lat is not null and periods.dropoff_lon is not null
),

-- Distance to the segment: to the nearest point of it (the projection clamped to its ends).
distances as (
    select
        *,
        sqrt(pow(ping_x - along * drop_x, 2) + pow(ping_y - along * drop_y, 2)) as distance_km
    from (
        select
            *,
            case
                when drop_x * drop_x + drop_y * drop_y = 0 then 0.0
                else greatest(
                    0.0, least(1.0, (ping_x * drop_x + ping_y * drop_y) / (drop_x * drop_x + drop_y * drop_y))
                )
            end as along
        from pair_pings
    ) as projected
),

-- Runs of consecutive off-route pings per pair (ordered by recorded_at, then ping_id): a ping back in the corridor
-- ends a run, and numbers the ones after it.
runs as (
    select
        *,
        distance_km > {{ off_route_km() }} as is_off,
        sum(case when distance_km <= {{ off_route_km() }} then 1 else 0 end) over (
            partition by courier_id, order_id order by recorded_at, ping_id rows unbounded preceding
        ) as returns_before,
        sum(case when distance_km <= {{ off_route_km() }} then 1 else 0 end) over (
            partition by courier_id, order_id order by recorded_at, ping_id
            rows between 1 following and unbounded following
        ) as returns_after
    from distances
),

episodes as (
    select
        courier_id,
        order_id,
        returns_before,
        min(recorded_at) as started_at,
        max(recorded_at) as last_off_at,
        count(*) as pings,
        max(distance_km) as max_distance_km,
        min_by(region, recorded_at) as region,
        bool_or(returns_after > 0) as has_returned
    from runs
    where is_off
    group by courier_id, order_id, returns_before
)

select
    cast(episodes.courier_id as bigint) as courier_id,
    cast(episodes.order_id as bigint) as order_id,
    cast(episodes.started_at as timestamp) as started_at,
    cast(case when episodes.has_returned or not pairs.is_open then episodes.last_off_at end as timestamp) as ended_at,
    cast(
        ({{ epoch_us('episodes.last_off_at') }} - {{ epoch_us('episodes.started_at') }}) / 60000000.0 as double
    ) as minutes,
    cast(episodes.pings as bigint) as pings,
    cast(episodes.max_distance_km as double) as max_distance_km,
    cast(episodes.region as string) as region
from episodes
inner join pairs on episodes.courier_id = pairs.courier_id and episodes.order_id = pairs.order_id
where ({{ epoch_us('episodes.last_off_at') }} - {{ epoch_us('episodes.started_at') }}) / 60000000.0
    >= {{ off_route_minutes() }}
