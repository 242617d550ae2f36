"""Dagster definitions, one sub-package per domain; each exposes ``build_defs(settings)``."""
