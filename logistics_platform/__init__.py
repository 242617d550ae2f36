"""Logistics lakehouse: CDC landing zone -> Iceberg bronze -> dbt marts, orchestrated by Dagster."""

__version__ = "0.1.0"
