"""Platform logic by domain, free of Dagster definitions: ``bronze``, ``transform``, ``operate``, ``maintenance``.

Nothing here imports :mod:`logistics_platform.defs` or :mod:`logistics_platform.definitions`; the Dagster layer
calls in, never the other way round.
"""
