"""Transform: the dbt project's runs and arrival window, publishing to Iceberg, late events."""
