{{ config(materialized='view') }}

with source as (
    select *
    from {{ source('ops', 'folded_windows') }}
),

renamed as (
    select
        cast(topic as varchar) as topic,
        cast(window_start as timestamp) as window_start,
        cast(folded_at as timestamp) as folded_at,
        cast(folded_by as varchar) as folded_by
    from source
)

select * from renamed
