"""`logistics-platform run`: generated landing data through the platform's own Dagster jobs, every mart built."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from logistics_platform.defs.constants import INGEST_JOB, TRANSFORM_JOB
from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.transform.project import MART_MODELS
from logistics_platform.pipeline import UNPARTITIONED_JOB, PipelineError, run_pipeline
from logistics_platform.settings import local_settings


def test_run_ingests_every_landed_hour_and_builds_every_mart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # an ephemeral instance: nothing lands in the repo's storage
    settings = local_settings(tmp_path)
    config = GeneratorConfig(start=datetime(2026, 11, 1), hours=3, seed=11, orders_per_day=400, pings_per_day=3000)
    generate(settings.landing_dir, config)
    progress: list[str] = []

    summary = run_pipeline(settings, log=progress.append)

    assert summary.ok, summary.render()
    assert summary.partitions == ["2026-11-01-00:00", "2026-11-01-01:00", "2026-11-01-02:00"]
    jobs = [r.job for r in summary.runs]
    # One ingest run per hour in order, then ONE ranged transform run over all of them, then the rest.
    assert jobs == [INGEST_JOB] * 3 + [TRANSFORM_JOB, UNPARTITIONED_JOB]
    assert [r.partition for r in summary.runs[:4]] == [*summary.partitions, "2026-11-01-00:00..2026-11-01-02:00"]
    assert set(summary.marts) == set(MART_MODELS)
    assert summary.marts["fct_orders"] > 0 and summary.bronze["orders"] > summary.marts["fct_orders"]
    assert len(progress) == 5 and all(line.endswith("ok") for line in progress)
    rendered = summary.render()
    assert "runs: 5 (0 failed)" in rendered and "marts.fct_orders" in rendered


def test_run_refuses_bad_partition_keys_and_a_missing_landing_zone(tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    with pytest.raises(PipelineError, match="run `logistics-platform generate`"):
        run_pipeline(settings)
    generate(settings.landing_dir, GeneratorConfig.clean(datetime(2026, 11, 1), hours=2, seed=3, orders_per_day=50))
    with pytest.raises(PipelineError, match="keys look like 2026-11-01-13:00"):
        run_pipeline(settings, ["2026-11-01 01:00"])
    # Validation comes before any run: nothing was ingested.
    assert not (tmp_path / "warehouse" / "catalog.db").exists()
