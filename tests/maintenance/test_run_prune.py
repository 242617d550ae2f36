"""Pruning superseded runs: the pure decision, and on a real Dagster instance what stays and what files go."""

from datetime import timedelta
from pathlib import Path

import dagster as dg

from logistics_platform.defs.maintenance import prune_superseded_runs
from logistics_platform.lib.maintenance.run_prune import remove_sqlite_file, superseded
from logistics_platform.lib.operate.transform_pending import WATERMARK_TAG, builders
from logistics_platform.lib.transform.arrival_window import ArrivalWindow


def test_a_run_holding_no_latest_event_is_superseded() -> None:
    events = {"a": {("x", "p1")}, "b": {("x", "p1"), "chk"}, "c": {("x", "p1")}, "empty": set()}
    latest = {("x", "p1"): "c", "chk": "b"}
    assert superseded(events, latest) == ["a", "empty"]


def test_a_kind_with_no_known_latest_keeps_its_runs() -> None:
    assert superseded({"a": {("x", "p1")}, "b": {("y", None)}}, {("x", "p1"): "other"}) == ["a"]


def test_builders_keep_per_hour_the_run_of_the_newest_watermark() -> None:
    def tags(first: str, last: str, watermark: int) -> dict[str, str]:
        return {**ArrivalWindow.of_hours(first, last).run_tags(), WATERMARK_TAG: str(watermark)}

    runs = {
        "old": tags("2026-11-30-03:00", "2026-11-30-04:00", 5),
        "new": tags("2026-11-30-04:00", "2026-11-30-04:00", 9),
        "live": ArrivalWindow.of_hours("2026-11-30-04:00", "2026-11-30-04:00").run_tags(),  # no watermark: built none
    }
    assert builders(runs) == {"2026-11-30-03:00": "old", "2026-11-30-04:00": "new"}


PARTITIONS = dg.StaticPartitionsDefinition(["p1", "p2"])


@dg.asset(partitions_def=PARTITIONS, check_specs=[dg.AssetCheckSpec("positive", asset="numbers")])
def numbers(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """A partitioned asset with a check."""
    if context.run.tags.get("fail"):
        raise RuntimeError("asked to fail")
    return dg.MaterializeResult(check_results=[dg.AssetCheckResult(passed=True)])


def test_prune_keeps_the_latest_run_of_each_partition_and_the_failed_runs() -> None:
    with dg.instance_for_test() as instance:
        p1 = [dg.materialize([numbers], instance=instance, partition_key="p1").run_id for _ in range(3)]
        p2 = dg.materialize([numbers], instance=instance, partition_key="p2").run_id
        failed = dg.materialize(
            [numbers], instance=instance, partition_key="p1", tags={"fail": "1"}, raise_on_error=False
        ).run_id
        check = dg.AssetCheckKey(numbers.key, "positive")
        partitions_before = instance.get_materialized_partitions(numbers.key)
        check_before = instance.event_log_storage.get_latest_asset_check_execution_by_key([check])[check].run_id

        storage = instance.event_log_storage
        files = {run_id: Path(storage.path_for_shard(run_id)) for run_id in [*p1, p2, failed]}  # type: ignore[attr-defined]
        assert all(f.exists() for f in files.values())
        size = sum(f.stat().st_size for f in Path(files[p2]).parent.iterdir())

        assert prune_superseded_runs(instance, timedelta(0)) == (2, 4)

        left = {r.run_id for r in instance.get_runs()}
        assert left == {p1[2], p2, failed}
        # SQLite: the pruned runs' event files are gone (emptied, they kept their size), the kept runs' stay
        assert {r for r, f in files.items() if f.exists()} == left
        assert sum(f.stat().st_size for f in Path(files[p2]).parent.iterdir()) < size
        assert len(instance.all_logs(p1[2])) > 0 and instance.get_run_by_id(p1[0]) is None
        assert instance.get_materialized_partitions(numbers.key) == partitions_before == {"p1", "p2"}
        latest_check = instance.event_log_storage.get_latest_asset_check_execution_by_key([check])[check]
        assert latest_check.run_id == check_before and check_before in left  # (planned by the failed run)
        assert prune_superseded_runs(instance, timedelta(0)) == (0, 2)
        assert prune_superseded_runs(instance, timedelta(hours=1)) == (0, 0)  # all ended just now


def test_remove_sqlite_file_takes_its_wal_and_shm_files_and_tolerates_missing_ones(tmp_path: Path) -> None:
    for name in ("run.db", "run.db-wal", "run.db-shm", "other.db"):
        (tmp_path / name).write_bytes(b"x")
    remove_sqlite_file(tmp_path / "run.db")
    remove_sqlite_file(tmp_path / "gone.db")
    assert [p.name for p in tmp_path.iterdir()] == ["other.db"]
