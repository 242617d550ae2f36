{{ config(materialized='view') }}

with source as (
    select *
    from {{ source('ops', 'folded_windows') }}
),

renamed as (
    select
        cast(topic as string) as topic,
        cast(window_start as timestamp) as window_start,
        cast(folded_at as timestamp) as folded_at,
        cast(folded_by as string) as folded_by
    from source
)

select * from renamed
