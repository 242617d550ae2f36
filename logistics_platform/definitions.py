"""Assembles the code location from the domain packages; holds no logic of its own."""

from __future__ import annotations

import dagster as dg

from logistics_platform.defs import bronze, capture, maintenance, operate, transform
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, load_settings


def build_definitions(settings: Settings) -> dg.Definitions:
    """The whole platform for one set of settings (tests build it on temp directories)."""
    domains = (bronze, transform, maintenance, operate, capture)
    resources = dg.Definitions(resources=build_resources(settings))
    return dg.Definitions.merge(*(domain.build_defs(settings) for domain in domains), resources)


defs = build_definitions(load_settings())
