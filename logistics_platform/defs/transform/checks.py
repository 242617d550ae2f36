"""After the publish: what Iceberg serves equals what DuckDB built (dbt's own tests are checks of the dbt assets)."""

# No `from __future__ import annotations`: Dagster reads the check function annotations at runtime.

from collections.abc import Iterator

import dagster as dg
from dagster_duckdb import DuckDBResource

from logistics_platform.defs.constants import PUBLISHED_KEYS
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.resources import IcebergCatalog


def build_publish_checks() -> list[dg.AssetChecksDefinition]:
    """Python-side check on the marts: what Iceberg serves equals what DuckDB built (row counts)."""

    @dg.multi_asset_check(
        specs=[dg.AssetCheckSpec("matches_duckdb", asset=PUBLISHED_KEYS[m]) for m in MART_MODELS],
        name="published_marts_match_duckdb",
    )
    def published_marts_match_duckdb(
        context: dg.AssetCheckExecutionContext, duckdb: DuckDBResource, iceberg: IcebergCatalog
    ) -> Iterator[dg.AssetCheckResult]:
        catalog = iceberg.get_catalog()
        with duckdb.get_connection() as con:  # the extensions are loaded (LakehouseDuckDB)
            for mart in MART_MODELS:
                built = con.sql(f"select count(*) from marts.{mart}").fetchone()
                table = catalog.load_table(f"marts.{mart}")
                snap = table.current_snapshot()
                served = int(snap.summary["total-records"]) if snap and snap.summary else 0
                expected = int(built[0]) if built else 0
                differs = f"Iceberg marts.{mart} has {served} rows, DuckDB {expected}: re-run the publish step"
                yield dg.AssetCheckResult(
                    asset_key=PUBLISHED_KEYS[mart],
                    check_name="matches_duckdb",
                    passed=served == expected,
                    metadata={"iceberg_rows": served, "duckdb_rows": expected},
                    description=None if served == expected else differs,
                )

    return [published_marts_match_duckdb]
