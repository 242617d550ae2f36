-- The server holds two databases: Dagster's instance storage (POSTGRES_DB=dagster) and the Iceberg SQL catalog.
CREATE DATABASE iceberg;
