"""Assembles the code location from the domain packages; holds no logic of its own."""

from __future__ import annotations

import dagster as dg

from logistics_platform.defs import bronze, maintenance, operate, transform
from logistics_platform.defs.transform.operations_checks import build_operations_checks
from logistics_platform.resources import build_resources
from logistics_platform.settings import Settings, load_settings


def build_definitions(settings: Settings) -> dg.Definitions:
    """The whole platform for one set of settings (tests build it on temp directories)."""
    return dg.Definitions.merge(
        bronze.build_defs(settings),
        transform.build_defs(settings),
        dg.Definitions(asset_checks=build_operations_checks(settings)),
        maintenance.build_defs(settings),
        operate.build_defs(settings),
        dg.Definitions(resources=build_resources(settings)),
    )


defs = build_definitions(load_settings())
