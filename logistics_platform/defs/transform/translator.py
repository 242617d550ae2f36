"""How dbt nodes become Dagster assets: dagster-dbt's keys (``[schema, name]``: the layer, ``reference`` for the seed;
sources ``[bronze, table]``), groups by layer, and each arrival day of a model reading that day's hours of bronze."""

from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator

from logistics_platform.defs.constants import DUCKDB_WRITER_TAGS, OWNERS
from logistics_platform.lib.bronze.views import BRONZE_SCHEMA

LAYERS = ("staging", "intermediate", "marts")


class LogisticsDbtTranslator(DagsterDbtTranslator):
    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        if dbt_resource_props["resource_type"] == "seed":
            return "staging"  # reference data loaded with the first layer
        layer = dbt_resource_props["config"].get("schema")
        if dbt_resource_props["resource_type"] == "model" and layer not in LAYERS:
            raise ValueError(
                f"dbt model {dbt_resource_props['name']} has schema {layer}: put models under models/<layer>/ (which "
                f"dbt_project.yml gives that schema) with layer in {', '.join(LAYERS)}"
            )
        return layer

    def get_owners(self, dbt_resource_props: Mapping[str, Any]) -> list[str] | None:
        return OWNERS

    def get_partition_mapping(
        self, dbt_resource_props: Mapping[str, Any], dbt_parent_resource_props: Mapping[str, Any]
    ) -> dg.PartitionMapping | None:
        # Bronze is hourly, the dbt layer daily: day D depends on the hours of D (stated, not left to the default).
        if dbt_parent_resource_props.get("source_name") == BRONZE_SCHEMA:
            return dg.TimeWindowPartitionMapping()
        return None

    def get_tags(self, dbt_resource_props: Mapping[str, Any]) -> Mapping[str, str]:
        return {**super().get_tags(dbt_resource_props), **DUCKDB_WRITER_TAGS}
