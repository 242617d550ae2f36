"""Change capture from the OLTP PostgreSQL database into the landing zone (issue 18).

Owns: the OLTP schema and its simulator, the pgoutput decoder, Debezium envelopes built from decoded rows,
the durable landing writer with its LSN manifest, logical-replication capture (slot, publication, exported
snapshot, exactly-once confirmation), the query-based fallback, and slot lag. Everything it lands follows the
landing contract (docs/contract/sources.md), so bronze and everything downstream ingest it unchanged.
"""
