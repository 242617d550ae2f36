{#- Pre-hook of the key-replacing incremental models: delete the keys of an affected-set model
    (models/intermediate/affected/, which says what "affected" means), a no-op on full refresh. The model then
    re-inserts those keys recomputed from their full staging history. -#}
{% macro delete_affected(key_column, affected, affected_column=none) -%}
    {%- if is_incremental() -%}
        delete from {{ this }} where {{ key_column }} in (select {{ affected_column or key_column }} from {{ affected }})
    {%- else -%}
        select 1
    {%- endif -%}
{%- endmacro %}
