"""Transform: the dbt project's command lines and arrival window, the window plan, publishing, late events.

Owns what happens after bronze: which dbt models an arrival-hour window needs, how dbt reads bronze
(the dbt-duckdb plugin), how marts are published to Iceberg, and the late-event fold.
"""
