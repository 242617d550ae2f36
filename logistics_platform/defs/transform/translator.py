"""How dbt nodes become Dagster assets: keys ``[layer, model]``, groups by layer, sources onto the bronze assets."""

from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator

from logistics_platform.defs.constants import DUCKDB_WRITER_TAGS, OWNERS
from logistics_platform.lib.bronze.views import BRONZE_SCHEMA

LAYERS = ("staging", "intermediate", "marts")


class LogisticsDbtTranslator(DagsterDbtTranslator):
    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        kind = dbt_resource_props["resource_type"]
        name = dbt_resource_props["name"]
        if kind == "source":
            return dg.AssetKey([dbt_resource_props["source_name"], name])
        if kind == "seed":
            return dg.AssetKey(["reference", name])
        return dg.AssetKey([self._layer(dbt_resource_props), name])

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        if dbt_resource_props["resource_type"] == "seed":
            return "staging"  # reference data loaded with the first layer
        return self._layer(dbt_resource_props)

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

    @staticmethod
    def _layer(props: Mapping[str, Any]) -> str:
        fqn = props.get("fqn") or []
        if (layer := fqn[1] if len(fqn) > 2 else "") not in LAYERS:
            raise ValueError(
                f"dbt model {props.get('name')} is in {'/'.join(fqn)}: put models under models/<layer>/ with layer "
                f"in {', '.join(LAYERS)}"
            )
        return layer
