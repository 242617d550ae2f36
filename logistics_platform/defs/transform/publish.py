"""The publish of the DuckDB marts to the Iceberg namespace ``marts`` (write-audit-publish, lib.transform.publish),
and the check that Iceberg then serves what DuckDB built (dbt's own tests are checks of the dbt assets)."""

# No `from __future__ import annotations`: Dagster reads the asset and check function annotations at runtime.

from collections.abc import Iterator
from typing import Any

import dagster as dg
from dagster_duckdb import DuckDBResource

from logistics_platform.defs.constants import DUCKDB_POOL, OWNERS, PUBLISHED_KEYS
from logistics_platform.defs.constants import DUCKDB_WRITER_TAGS as WRITER_TAGS
from logistics_platform.defs.preflight import require_usable_lakehouse
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.lib.transform.publish import AUDIT_BRANCH, PARTITION_COLUMNS, AuditFailed, publish_marts
from logistics_platform.resources import IcebergCatalog
from logistics_platform.settings import Settings

PUBLISH_ASSET_NAME = "publish_marts"


def build_publish_assets() -> dg.AssetsDefinition:
    @dg.multi_asset(
        name=PUBLISH_ASSET_NAME,
        pool=DUCKDB_POOL,
        specs=[
            dg.AssetSpec(
                key=PUBLISHED_KEYS[m],
                deps=[dg.AssetKey(["marts", m])],
                group_name="marts",
                description=(
                    f"marts.{m} published to the Iceberg namespace `marts`: audited on branch `{AUDIT_BRANCH}`, "
                    "then `main` fast-forwarded; "
                    + (
                        f"partitioned by day({PARTITION_COLUMNS[m]}), only the changed days are rewritten."
                        if m in PARTITION_COLUMNS
                        else "unpartitioned, rewritten whole when it changed."
                    )
                ),
                kinds={"iceberg"},
                owners=OWNERS,
                tags=WRITER_TAGS,
            )
            for m in MART_MODELS
        ],
        op_tags=WRITER_TAGS,
        retry_policy=dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL),
    )
    def publish(
        context: dg.AssetExecutionContext,
        duckdb: DuckDBResource,
        iceberg: IcebergCatalog,
        settings: dg.ResourceParam[Settings],
    ) -> Iterator[dg.MaterializeResult]:
        """Write every DuckDB mart to an audit branch of its Iceberg table; fast-forward `main` if all pass."""
        require_usable_lakehouse(settings)
        catalog = iceberg.get_catalog()
        with duckdb.get_connection() as con:  # the extensions are loaded (LakehouseDuckDB)
            try:
                reports = publish_marts(
                    catalog, con, progress=context.log.info, max_row_drop=settings.publish_max_row_drop
                )
            except AuditFailed as exc:
                raise dg.Failure(
                    description=str(exc),
                    allow_retries=False,
                    metadata={
                        m: dg.MetadataValue.json(
                            {
                                "audit": r.audit,
                                "failures": r.audit_failures,
                                "branch": AUDIT_BRANCH,
                                "audited_snapshot_id": str(r.audited_snapshot_id),
                            }
                        )
                        for m, r in exc.reports.items()
                    },
                ) from exc
        for mart, report in reports.items():
            metadata: dict[str, Any] = {
                "dagster/row_count": report.rows,
                "snapshot_id": str(report.snapshot_id),
                "duration_seconds": round(report.seconds, 3),
                "publish_seconds": round(report.seconds - report.audit_seconds, 3),
                "audit_seconds": round(report.audit_seconds, 3),
                "audit": report.audit,
                "audited_snapshot_id": str(report.audited_snapshot_id),
                "partitions_rewritten": dg.MetadataValue.json(report.partitions_rewritten),
            }
            yield dg.MaterializeResult(asset_key=PUBLISHED_KEYS[mart], metadata=metadata)

    return publish


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
                snap = catalog.load_table(f"marts.{mart}").current_snapshot()
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
