"""Reference data of the simulated OLTP world: regions, tenants, courier names, business constants."""

from logistics_platform.lib import contract

# (region, latitude, longitude of its centre)
REGIONS: tuple[tuple[str, float, float], ...] = (
    ("sp-centro", -23.5505, -46.6333),
    ("sp-pinheiros", -23.5670, -46.6920),
    ("sp-mooca", -23.5600, -46.5990),
    ("rj-centro", -22.9068, -43.1729),
    ("rj-barra", -23.0004, -43.3659),
    ("bh-savassi", -19.9380, -43.9340),
    ("poa-centro", -30.0346, -51.2177),
    ("cwb-batel", -25.4420, -49.2900),
)
REGION_NAMES = tuple(r[0] for r in REGIONS)

TENANT_NAMES = (
    *("Mercado Azul", "Farmácia Vida", "Pizzaria Napoli", "Livraria Página", "Pet Feliz", "Açougue Central"),
    *("Floricultura Ipê", "Eletro Rápido", "Padaria Pão Quente", "Sushi Kenzo", "Moda Bella", "Café Grão"),
    *("Hortifruti Verde", "Burger Norte", "Adega São Jorge", "Papelaria Lápis"),
)
TIERS = contract.TIERS
VEHICLES = contract.VEHICLES
VEHICLE_WEIGHTS = (3, 5, 2, 1)
VEHICLE_SPEED_KMH = {"bike": 15.0, "motorbike": 32.0, "car": 26.0, "van": 22.0}
FIRST_NAMES = (
    *("Ana", "Bruno", "Carla", "Diego", "Eduarda", "Felipe", "Gabriela", "Henrique", "Isabela", "João", "Larissa"),
    *("Marcos", "Natália", "Otávio", "Paula", "Rafael", "Sofia", "Thiago", "Vitória", "Wesley"),
)
LAST_NAMES = (
    *("Silva", "Santos", "Oliveira", "Souza", "Lima", "Pereira", "Costa", "Ferreira", "Almeida", "Ribeiro"),
    *("Carvalho", "Gomes", "Martins", "Araújo", "Rocha"),
)
PAYMENT_METHODS = contract.PAYMENT_METHODS
PAYMENT_METHOD_WEIGHTS = (55, 30, 5, 10)
TIP_CENTS = (0, 0, 0, 200, 300, 500, 800, 1000)

# Orders per hour of day (UTC here stands in for local time): quiet nights, lunch and dinner peaks.
HOURLY_WEIGHTS = (
    *(0.25, 0.15, 0.10, 0.08, 0.08, 0.15),  # 00 .. 05 h
    *(0.40, 0.70, 0.90, 1.00, 1.20, 1.80),  # 06 .. 11 h
    *(2.00, 1.50, 1.00, 0.90, 1.00, 1.30),  # 12 .. 17 h
    *(1.90, 2.10, 1.80, 1.20, 0.80, 0.45),  # 18 .. 23 h
)
HOURLY_SHARE = tuple(w / sum(HOURLY_WEIGHTS) for w in HOURLY_WEIGHTS)

# Mean seconds a courier's phone reports per delivered order: assigned -> picked up (12.5 min),
# waiting (2 min), in transit (30 min), riding back (6.5 min). Used to size the ping interval.
MEAN_TRIP_SECONDS = 3060.0
