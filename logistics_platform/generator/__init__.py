"""Deterministic generator of the landing contract (docs/contract/sources.md, docs/internals/generator.md):
``generate(out_dir, GeneratorConfig(start=...))`` also writes its summary to ``<out_dir>/_generation.json``."""

from logistics_platform.generator.config import GeneratorConfig, GeneratorConfigError
from logistics_platform.generator.engine import GENERATION_FILE, generate

__all__ = ["GENERATION_FILE", "GeneratorConfig", "GeneratorConfigError", "generate"]
