"""The pre-flight check of the steps that use the catalog and the warehouse, shared by the domains."""

import dagster as dg

from logistics_platform.lib.connections import MisconfiguredError, preflight
from logistics_platform.settings import Settings


def require_usable_lakehouse(settings: Settings) -> None:
    """Fail the step at once, without step retries (they are for commit conflicts), on a misconfigured lakehouse."""
    try:
        preflight(settings)
    except MisconfiguredError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False, metadata={"setting": exc.setting}) from None
