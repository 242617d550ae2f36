"""Bronze: landing files -> typed Iceberg rows (or quarantine rows), exactly once per hour, and the dbt views."""
