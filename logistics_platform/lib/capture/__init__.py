"""Change capture from the OLTP PostgreSQL database into the landing zone (docs/capture.md)."""
