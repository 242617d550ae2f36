"""Deterministic generator of the landing contract (docs/contract/sources.md, docs/internals/generator.md):
``generate(out_dir, GeneratorConfig(start=...))`` also writes its summary to ``<out_dir>/_generation.json``."""

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
