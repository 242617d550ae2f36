"""The OLTP database of the source contract: tables, keys, replica identity, and the publication.

REPLICA IDENTITY DEFAULT (the primary key) on every table: deletes carry the key in ``before``, which is all the
contract needs (docs/contract/sources.md: "for u/d it may hold only the key"); FULL would write every old column into
the WAL on each update and delete for images nothing downstream reads.
"""

from __future__ import annotations

from typing import Any

# Contract order of columns per table (docs/contract/sources.md); the key is first.
TABLES: dict[str, tuple[str, ...]] = {
    "tenants": ("tenant_id", "name", "tier", "region", "updated_at"),
    "couriers": ("courier_id", "name", "region", "vehicle", "active", "updated_at"),
    "orders": (
        "order_id",
        "tenant_id",
        "courier_id",
        "region",
        "status",
        "total_amount",
        "delivery_fee",
        "created_at",
        "promised_at",
        "delivered_at",
        "updated_at",
    ),
    "payments": ("payment_id", "order_id", "amount", "method", "status", "created_at", "updated_at"),
}
KEYS = {"tenants": "tenant_id", "couriers": "courier_id", "orders": "order_id", "payments": "payment_id"}
SCHEMA = "public"

DDL = """
create table if not exists tenants (
    tenant_id text primary key,
    name text not null,
    tier text not null check (tier in ('bronze', 'silver', 'gold')),
    region text not null,
    updated_at timestamptz not null default clock_timestamp()
);
create table if not exists couriers (
    courier_id bigint primary key,
    name text not null,
    region text not null,
    vehicle text not null check (vehicle in ('bike', 'motorbike', 'car', 'van')),
    active boolean not null,
    updated_at timestamptz not null default clock_timestamp()
);
create table if not exists orders (
    order_id bigint primary key,
    tenant_id text not null references tenants (tenant_id),
    courier_id bigint,
    region text not null,
    status text not null
        check (status in ('created', 'assigned', 'picked_up', 'in_transit', 'delivered', 'cancelled')),
    total_amount numeric(12, 2) not null,
    delivery_fee numeric(12, 2) not null,
    created_at timestamptz not null,
    promised_at timestamptz not null,
    delivered_at timestamptz,
    updated_at timestamptz not null default clock_timestamp()
);
create table if not exists payments (
    payment_id bigint primary key,
    order_id bigint not null,
    amount numeric(12, 2) not null,
    method text not null check (method in ('card', 'pix', 'boleto', 'cash')),
    status text not null check (status in ('authorized', 'captured', 'refunded', 'failed')),
    created_at timestamptz not null,
    updated_at timestamptz not null default clock_timestamp()
);
-- The query-based capture polls by updated_at: without these it scans every table on every poll.
create index if not exists orders_updated_at on orders (updated_at);
create index if not exists payments_updated_at on payments (updated_at);
create index if not exists tenants_updated_at on tenants (updated_at);
create index if not exists couriers_updated_at on couriers (updated_at);
alter table tenants replica identity default;
alter table couriers replica identity default;
alter table orders replica identity default;
alter table payments replica identity default;
"""


def create_schema(conn: Any) -> None:
    """Create the contract's tables in the OLTP database when they are missing (idempotent), and commit."""
    with conn.cursor() as cur:
        cur.execute(DDL)
    conn.commit()


def ensure_publication(conn: Any, publication: str) -> bool:
    """Create ``publication`` for the contract's tables unless it exists; True when it was created."""
    with conn.cursor() as cur:
        cur.execute("select 1 from pg_publication where pubname = %s", (publication,))
        if cur.fetchone():
            return False
        tables = ", ".join(f"{SCHEMA}.{t}" for t in TABLES)
        cur.execute(f'create publication "{publication}" for table {tables}')
    conn.commit()
    return True
