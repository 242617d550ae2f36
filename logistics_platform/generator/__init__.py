"""Deterministic generator of the landing contract (docs/contract/sources.md): Debezium CDC + tracking pings as
Kafka Connect would land them, with every anomaly the platform must survive at a configurable rate.

Usage::

    from logistics_platform.generator import GeneratorConfig, generate
    summary = generate(out_dir, GeneratorConfig(start=datetime(2026, 11, 1), hours=6, seed=7))

``summary`` is also written to ``<out_dir>/_generation.json`` (for tests; the pipeline never reads it).
"""

from logistics_platform.generator.config import DEFAULT_PARTITIONS, GeneratorConfig, GeneratorConfigError
from logistics_platform.generator.engine import GENERATION_FILE, generate, stderr_progress
from logistics_platform.generator.model import TOPICS

__all__ = [
    "DEFAULT_PARTITIONS",
    "GENERATION_FILE",
    "TOPICS",
    "GeneratorConfig",
    "GeneratorConfigError",
    "generate",
    "stderr_progress",
]
