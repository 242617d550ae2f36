"""Deterministic generator of the landing contract (docs/contract/sources.md): Debezium CDC + tracking pings as
Kafka Connect would land them, every anomaly at a configurable rate. ``generate(out_dir, GeneratorConfig(start=...))``
writes them and returns the summary it also writes to ``<out_dir>/_generation.json`` (tests read it, the pipeline not).
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
