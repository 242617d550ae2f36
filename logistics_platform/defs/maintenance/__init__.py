"""Dagster definitions for the maintenance domain."""

from __future__ import annotations

import dagster as dg

from logistics_platform.settings import Settings


def build_defs(settings: Settings) -> dg.Definitions:
    """Assets, checks, jobs, sensors and schedules of this domain."""
    return dg.Definitions()
