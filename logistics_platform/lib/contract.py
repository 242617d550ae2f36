"""The source contract (docs/contract/sources.md), declared once: topics, keys, typed columns (internals/core.md)."""

from __future__ import annotations

from dataclasses import dataclass

# Logical type names of the contract (PostgreSQL's, as sources.md writes them).
TEXT_NAME, BIGINT_NAME, BOOLEAN_NAME = "text", "bigint", "boolean"
DOUBLE_NAME, NUMERIC_NAME, TIMESTAMPTZ_NAME = "double", "numeric", "timestamptz"


@dataclass(frozen=True)
class ColumnType:
    """A column's logical type; ``precision`` and ``scale`` only for ``numeric``."""

    name: str
    precision: int | None = None
    scale: int | None = None

    def __str__(self) -> str:
        """The type as sources.md writes it: ``text``, ``numeric(12,2)``..."""
        return f"{self.name}({self.precision},{self.scale})" if self.name == NUMERIC_NAME else self.name

    @property
    def is_decimal(self) -> bool:
        return self.name == NUMERIC_NAME


def numeric(precision: int, scale: int) -> ColumnType:
    """A decimal type: at most ``precision`` digits, ``scale`` of them after the point."""
    return ColumnType(NUMERIC_NAME, precision, scale)


TEXT = ColumnType(TEXT_NAME)
BIGINT = ColumnType(BIGINT_NAME)
BOOLEAN = ColumnType(BOOLEAN_NAME)
DOUBLE = ColumnType(DOUBLE_NAME)
TIMESTAMPTZ = ColumnType(TIMESTAMPTZ_NAME)
# Every decimal column is money, numeric(12,2): the decimal decoders read this one type (a test checks it).
MONEY_PRECISION, MONEY_SCALE = 12, 2
MONEY = numeric(MONEY_PRECISION, MONEY_SCALE)
# The canonical text of a money value (decimal.handling.mode=string): the integer digits, a dot, every decimal.
MONEY_TEXT_RE = rf"-?[0-9]{{1,{MONEY_PRECISION - MONEY_SCALE}}}\.[0-9]{{{MONEY_SCALE}}}"


@dataclass(frozen=True)
class SourceColumn:
    """One column of a topic's row image (``after`` / ``before``), as its OLTP table declares it."""

    name: str
    type: ColumnType
    doc: str
    nullable: bool = False
    # The only values the column takes (a check constraint in the OLTP table); empty: any value of its type.
    values: tuple[str, ...] = ()
    # SQL default of the OLTP column (Debezium also sends it as a delete's placeholder).
    default: str | None = None
    # Table whose key this column refers to (a foreign key in the OLTP table).
    references: str | None = None


@dataclass(frozen=True)
class SourceTopic:
    """One landing topic, the OLTP table (or device stream) it carries and the bronze table of the same short name."""

    table: str
    topic: str
    key: str
    # What one line of the topic is, for people (the bronze asset's description starts with it).
    description: str
    columns: tuple[SourceColumn, ...]
    cdc: bool = True
    # Columns a producer adds part way (sources.md §5): bronze gains them when they land, not declared up front.
    added_columns: tuple[SourceColumn, ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> SourceColumn:
        """The contract column (or added column) ``name``; KeyError when the topic has none of that name."""
        for c in self.columns + self.added_columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.table} has no column {name!r}")


_UPDATED_AT = SourceColumn(
    "updated_at", TIMESTAMPTZ, "Row update time in the OLTP database (UTC).", default="clock_timestamp()"
)
TIERS = ("bronze", "silver", "gold")
VEHICLES = ("bike", "motorbike", "car", "van")
ORDER_STATUSES = ("created", "assigned", "picked_up", "in_transit", "delivered", "cancelled")
PAYMENT_METHODS = ("card", "pix", "boleto", "cash")
PAYMENT_STATUSES = ("authorized", "captured", "refunded", "failed")
ORDER_COORDINATES = ("pickup_lat", "pickup_lon", "dropoff_lat", "dropoff_lon")  # orders gain them part way

# In sources.md's order: the generator, the capture and the bronze assets list the topics in this order.
SOURCES: dict[str, SourceTopic] = {
    s.table: s
    for s in (
        SourceTopic(
            table="tenants",
            topic="oltp.public.tenants",
            key="tenant_id",
            description="Tenant change events (Debezium CDC)",
            columns=(
                SourceColumn("tenant_id", TEXT, "Tenant key."),
                SourceColumn("name", TEXT, "Tenant display name."),
                SourceColumn("tier", TEXT, "Pricing tier: bronze, silver or gold.", values=TIERS),
                SourceColumn("region", TEXT, "Home region of the tenant."),
                _UPDATED_AT,
            ),
        ),
        SourceTopic(
            table="couriers",
            topic="oltp.public.couriers",
            key="courier_id",
            description="Courier change events (Debezium CDC)",
            columns=(
                SourceColumn("courier_id", BIGINT, "Courier key."),
                SourceColumn("name", TEXT, "Courier name."),
                SourceColumn("region", TEXT, "Region the courier works in."),
                SourceColumn("vehicle", TEXT, "bike, motorbike, car or van.", values=VEHICLES),
                SourceColumn("active", BOOLEAN, "Whether the courier takes orders."),
                _UPDATED_AT,
            ),
        ),
        SourceTopic(
            table="orders",
            topic="oltp.public.orders",
            key="order_id",
            description="Order change events (Debezium CDC)",
            columns=(
                SourceColumn("order_id", BIGINT, "Order key."),
                SourceColumn("tenant_id", TEXT, "Tenant that placed the order.", references="tenants"),
                SourceColumn("courier_id", BIGINT, "Assigned courier; null until assigned.", nullable=True),
                SourceColumn("region", TEXT, "Delivery region."),
                SourceColumn(
                    "status",
                    TEXT,
                    "created, assigned, picked_up, in_transit, delivered, cancelled.",
                    values=ORDER_STATUSES,
                ),
                SourceColumn("total_amount", MONEY, "Order total charged to the customer."),
                SourceColumn("delivery_fee", MONEY, "Part of the total paid to the courier."),
                SourceColumn("created_at", TIMESTAMPTZ, "Order creation time (UTC)."),
                SourceColumn("promised_at", TIMESTAMPTZ, "Promised delivery time (UTC)."),
                SourceColumn(
                    "delivered_at", TIMESTAMPTZ, "Actual delivery time (UTC); null until delivered.", nullable=True
                ),
                _UPDATED_AT,
            ),
            added_columns=(
                SourceColumn(
                    "tip_amount",
                    MONEY,
                    "Tip for the courier: a column the orders table gained part way (sources.md §6).",
                    nullable=True,
                ),
                SourceColumn("pickup_lat", DOUBLE, "Pickup latitude (WGS84), added part way.", nullable=True),
                SourceColumn("pickup_lon", DOUBLE, "Pickup longitude (WGS84), added part way.", nullable=True),
                SourceColumn("dropoff_lat", DOUBLE, "Drop-off latitude (WGS84), added part way.", nullable=True),
                SourceColumn("dropoff_lon", DOUBLE, "Drop-off longitude (WGS84), added part way.", nullable=True),
            ),
        ),
        SourceTopic(
            table="payments",
            topic="oltp.public.payments",
            key="payment_id",
            description="Payment change events (Debezium CDC)",
            columns=(
                SourceColumn("payment_id", BIGINT, "Payment key."),
                SourceColumn("order_id", BIGINT, "Order the payment belongs to."),
                SourceColumn("amount", MONEY, "Payment amount."),
                SourceColumn("method", TEXT, "card, pix, boleto or cash.", values=PAYMENT_METHODS),
                SourceColumn("status", TEXT, "authorized, captured, refunded or failed.", values=PAYMENT_STATUSES),
                SourceColumn("created_at", TIMESTAMPTZ, "Payment creation time (UTC)."),
                _UPDATED_AT,
            ),
        ),
        SourceTopic(
            table="tracking_pings",
            topic="logistics.tracking_pings",
            key="ping_id",
            description="Courier GPS pings",
            cdc=False,
            columns=(
                SourceColumn("ping_id", TEXT, "Ping id (uuid): the event identity of a ping."),
                SourceColumn("courier_id", BIGINT, "Courier whose device sent the ping."),
                SourceColumn("order_id", BIGINT, "Order being carried, if any.", nullable=True),
                SourceColumn("lat", DOUBLE, "Latitude (WGS84)."),
                SourceColumn("lon", DOUBLE, "Longitude (WGS84)."),
                SourceColumn("speed_kmh", DOUBLE, "Speed reported by the device."),
                SourceColumn("recorded_at", TIMESTAMPTZ, "Device clock time of the ping (UTC): its event time."),
            ),
        ),
    )
}

EXTRA_PREFIX = "extra_"  # a topic outside the contract lands in bronze.extra_<topic> (sources.md, section 8)
# The OLTP tables Debezium streams (the capture's database), in contract order.
CDC_TABLES: tuple[str, ...] = tuple(t for t, s in SOURCES.items() if s.cdc)
