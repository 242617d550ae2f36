"""Platform logic by domain, free of Dagster definitions; the Dagster layer (``defs``) calls in, never back."""
