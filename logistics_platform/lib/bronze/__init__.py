"""Bronze: the landing zone, the Debezium envelope, the bronze Iceberg schema, the ingest and its accounting.

Owns everything between a landed JSON Lines file and a committed bronze row (or quarantine row), plus the
DuckDB views that expose the bronze tables to dbt.
"""
