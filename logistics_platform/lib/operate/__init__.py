"""Operate: the decisions behind the sensors, schedules and operator commands (the Dagster glue is ``defs/operate``)."""
