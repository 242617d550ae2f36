"""The pre-flight check of the steps that use the catalog and the warehouse, shared by the domains."""

import dagster as dg

from logistics_platform.settings import Settings


def require_usable_lakehouse(settings: Settings) -> None:
    """Fail the step at once, without step retries, when the catalog or the warehouse is misconfigured.

    A closed port, a refused login, a missing database or bucket fail the same way on every attempt: the retry
    policies of the steps are for commit conflicts and brief outages in the middle of a step, not for this.
    """
    from logistics_platform.lib.connections import MisconfiguredError, preflight

    try:
        preflight(settings)
    except MisconfiguredError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False, metadata={"setting": exc.setting}) from None
