{{ config(materialized='view') }}

with folds as (
    select topic, window_start, folded_at, folded_by
    from {{ source('ops', 'folded_windows') }}
)

select
    cast(topic as varchar) as topic,
    cast(window_start as timestamp) as window_start,
    cast(folded_at as timestamp) as folded_at,
    cast(folded_by as varchar) as folded_by
from folds
