{{ config(
    materialized='incremental',
    incremental_strategy='append',
    pre_hook="
        {% if is_incremental() %}
        {{ delete_matching(this, 'select * from ' ~ ref('int_affected_ping_bounds'),
            'target.courier_id = affected.courier_id and target.recorded_at >= affected.changed_from') }}
        {% else %}select 1{% endif %}",
) }}
-- The keys or windows the run's arrival window changed, read in the incremental branch only.
{%- set affected_ping_bounds = ref('int_affected_ping_bounds') %}

with pings as (
    select ping_id, courier_id, lat, lon, recorded_at
    from {{ ref('stg_tracking_pings') }}
),

{% if is_incremental() -%}
-- Per touched courier, its pairs from the first new ping on, and the last ping before it as their first predecessor.
-- The predecessor is looked for in the day before first (a bounded scan: the latest ping of that day is the latest of
-- all), and in the courier's whole history only when that day has none (a courier back after a break).
affected as (
    select courier_id, changed_from from {{ affected_ping_bounds }}
),

recent_predecessors as (
    select affected.courier_id, affected.changed_from, max(earlier.recorded_at) as previous_at
    from affected
    left join pings as earlier
        on affected.courier_id = earlier.courier_id
        and earlier.recorded_at < affected.changed_from
        and earlier.recorded_at >= affected.changed_from - interval 1 day
    group by affected.courier_id, affected.changed_from
),

older_predecessors as (
    select idle.courier_id, idle.changed_from, max(earlier.recorded_at) as previous_at
    from recent_predecessors as idle
    inner join pings as earlier
        on idle.courier_id = earlier.courier_id and earlier.recorded_at < idle.changed_from
    where idle.previous_at is null
    group by idle.courier_id, idle.changed_from
),

bounds as (
    select
        recent.courier_id,
        recent.changed_from,
        coalesce(recent.previous_at, older.previous_at, recent.changed_from) as read_from
    from recent_predecessors as recent
    left join older_predecessors as older
        on recent.courier_id = older.courier_id and recent.changed_from = older.changed_from
),

candidate_pings as (
    select pings.*, bounds.changed_from
    from pings
    inner join bounds on pings.courier_id = bounds.courier_id and pings.recorded_at >= bounds.read_from
),
{%- else -%}
candidate_pings as (
    select *, timestamp '0001-01-01' as changed_from
    from pings
),
{%- endif %}

pairs as (
    select
        courier_id,
        ping_id,
        lag(ping_id) over by_time as previous_ping_id,
        recorded_at,
        lag(recorded_at) over by_time as previous_recorded_at,
        radians(lat) as lat_rad,
        radians(lon) as lon_rad,
        lag(radians(lat)) over by_time as previous_lat_rad,
        lag(radians(lon)) over by_time as previous_lon_rad,
        changed_from
    from candidate_pings
    window by_time as (partition by courier_id order by recorded_at, ping_id)
),

-- Haversine distance on a sphere of the mean earth radius (6371.0088 km).
distances as (
    select
        *,
        2 * 6371.0088 * asin(sqrt(
            pow(sin((lat_rad - previous_lat_rad) / 2), 2)
            + cos(previous_lat_rad) * cos(lat_rad) * pow(sin((lon_rad - previous_lon_rad) / 2), 2)
        )) as distance_km,
        ({{ epoch_us('recorded_at') }} - {{ epoch_us('previous_recorded_at') }}) / cast(3600000000 as double) as hours
    from pairs
    where recorded_at > previous_recorded_at and recorded_at >= changed_from
)

select
    cast(courier_id as bigint) as courier_id,
    cast(ping_id as string) as ping_id,
    cast(previous_ping_id as string) as previous_ping_id,
    cast(recorded_at as timestamp) as recorded_at,
    cast(previous_recorded_at as timestamp) as previous_recorded_at,
    cast(distance_km as double) as distance_km,
    cast(distance_km / hours as double) as implied_kmh
from distances
where distance_km / hours > {{ gps_jump_kmh() }}
