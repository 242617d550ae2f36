{#- The audit gate of the marts on Spark: Iceberg's write-audit-publish with a branch (docs/spark.md, "The audit gate").

    Every mart table has `write.wap.enabled=true` (dbt_project.yml) and dbt's Spark session names the audit branch
    in `spark.wap.branch` (lib/transform/spark.py): Iceberg then commits every write of a mart (the pre-hooks'
    deletes, the inserts, the first build's create) to that branch, creating it from main when missing, and reads in
    the session read the branch too, so dbt's tests audit what the run wrote. `main`, which every other reader
    sees, moves only in on-run-end: fast-forwarded to the branch for the marts whose data tests ran in this
    invocation, and only when no node of the invocation failed or was skipped. A failing run leaves main where it
    was; the branch keeps the run's writes (it is the marts' working state, as the DuckDB file is on DuckDB) and the
    next run of the same window rewrites them there before they are audited again. -#}

{% macro audit_branch() -%}
    {%- set value = run_query('set spark.wap.branch').columns[1].values()[0] -%}
    {%- if not value or value == '<undefined>' -%}
        {%- do exceptions.raise_compiler_error(
            'spark.wap.branch is not set in the Spark session, so the marts would be written to main without the '
            ~ 'audit gate: set it (logistics_platform.lib.transform.spark does for method: session; a Thrift server '
            ~ 'needs --conf spark.wap.branch=audit)') -%}
    {%- endif -%}
    {{- return(value) -}}
{%- endmacro %}

{#- on-run-start: mart tables created before the gate existed get the table property (and the branch, at main) that
    puts them behind it; tables dbt creates get both from their first build. -#}
{% macro ensure_audit_gate() -%}{{ return(adapter.dispatch('ensure_audit_gate')()) }}{%- endmacro %}
{% macro default__ensure_audit_gate() -%}select 1{%- endmacro %}
{% macro spark__ensure_audit_gate() -%}
    {#- Without the session's branch the marts would be written on main: every run fails here first. -#}
    {%- set branch = audit_branch() if execute else none -%}
    {%- if execute and (run_query("show namespaces like 'marts'") | length) > 0 -%}
        {%- for row in run_query('show tables in marts') -%}
            {%- set table = 'marts.' ~ row['tableName'] -%}
            {%- set wap = run_query('show tblproperties ' ~ table ~ " ('write.wap.enabled')").columns[1].values()[0] -%}
            {%- if wap != 'true' -%}
                {%- do log('audit gate: putting ' ~ table ~ ' behind branch ' ~ branch, info=True) -%}
                {%- do run_query('alter table ' ~ table ~ " set tblproperties ('write.wap.enabled'='true')") -%}
                {%- do run_query('alter table ' ~ table ~ ' create branch if not exists `' ~ branch ~ '`') -%}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
    select 1
{%- endmacro %}

{#- on-run-end: publish (fast-forward main to the audit branch) the marts this invocation audited, or hold them all. -#}
{% macro publish_audited_marts(results) -%}{{ return(adapter.dispatch('publish_audited_marts')(results)) }}{%- endmacro %}
{% macro default__publish_audited_marts(results) -%}select 1{%- endmacro %}
{% macro spark__publish_audited_marts(results) -%}
    {%- if execute -%}
        {%- set failed = [] -%}
        {%- set audited = [] -%}
        {%- for result in results -%}
            {%- if result.status in ['error', 'fail', 'skipped', 'runtime error'] -%}
                {%- do failed.append(result.node.name ~ ' (' ~ result.status ~ ')') -%}
            {%- elif result.node.resource_type == 'test' -%}
                {%- for parent in result.node.depends_on.nodes -%}
                    {%- set model = graph.nodes.get(parent) -%}
                    {%- if model and model.resource_type == 'model' and model.schema == 'marts'
                        and model.alias not in audited -%}
                        {%- do audited.append(model.alias) -%}
                    {%- endif -%}
                {%- endfor -%}
            {%- endif -%}
        {%- endfor -%}
        {%- if failed -%}
            {%- do log('audit gate: held, main of every mart left where it was: '
                       ~ failed | length ~ ' node(s) failed or skipped: ' ~ failed[:5] | join(', '), info=True) -%}
        {%- elif not audited -%}
            {%- do log('audit gate: no data test of a mart ran, main of every mart left where it was '
                       ~ '(a `dbt build` or `dbt test` that passes publishes them)', info=True) -%}
        {%- else -%}
            {%- set branch = audit_branch() -%}
            {%- set moved = [] -%}
            {%- for mart in audited | sort -%}
                {%- set refs = run_query('select name, snapshot_id from marts.' ~ mart ~ ".refs where name in ('main', '"
                                         ~ branch ~ "')") -%}
                {%- set heads = {} -%}
                {%- for ref in refs -%}{%- do heads.update({ref['name']: ref['snapshot_id']}) -%}{%- endfor -%}
                {%- if branch in heads and heads.get('main') != heads[branch] -%}
                    {#- Fails (and so fails the invocation) when main is no ancestor of the branch: another writer
                        moved main. -#}
                    {%- do run_query("call system.fast_forward('marts." ~ mart ~ "', 'main', '" ~ branch ~ "')") -%}
                    {%- do moved.append(mart) -%}
                {%- endif -%}
            {%- endfor -%}
            {%- do log('audit gate: passed, main fast-forwarded to branch ' ~ branch ~ ' for ' ~ moved | length ~ ' of '
                       ~ audited | length ~ ' audited marts' ~ (': ' ~ moved | join(', ') if moved else ''), info=True) -%}
        {%- endif -%}
    {%- endif -%}
    select 1
{%- endmacro %}
