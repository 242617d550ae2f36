"""The bronze domain's asset keys: landing (external) and bronze per topic, topics outside the contract, the rest."""

import dagster as dg

from logistics_platform.defs.constants import INGEST_LOG_KEY
from logistics_platform.lib.bronze import schema as bs

LANDING_KEYS: dict[str, dg.AssetKey] = {t: dg.AssetKey(["landing", t]) for t in bs.TOPICS}
TOPIC_KEYS: dict[str, dg.AssetKey] = {t: dg.AssetKey(["bronze", t]) for t in bs.TOPICS}
QUARANTINE_KEY = dg.AssetKey(["bronze", bs.QUARANTINE_TABLE])
EXTRA_KEY = dg.AssetKey(["bronze", "extra_topics"])  # every topic outside the contract, a table each
BRONZE_ASSET_KEYS: list[dg.AssetKey] = [*TOPIC_KEYS.values(), EXTRA_KEY, QUARANTINE_KEY, INGEST_LOG_KEY]
"""Every asset the bronze multi-asset materializes."""
