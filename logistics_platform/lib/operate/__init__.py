"""Operate: alerts, the landing-zone watch, ingest progress and backlog, and the rebuild-and-swap.

Owns the decisions behind the sensors, schedules and operator commands; the Dagster glue lives in
``defs/operate``.
"""
