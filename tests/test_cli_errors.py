"""Every error a user can cause is one line on stderr saying what was wrong and what to do, exit code 1 or 2."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from logistics_platform.cli import main
from logistics_platform.cli.render import render_summary
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.timekeys import hour_key
from logistics_platform.pipeline import RunRecord, Summary, table_counts
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import HOUR, contract_hour
from tests.support.processes import one_line


@pytest.fixture
def settings(tmp_path: Path, cli_env: Callable[[Settings], None]) -> Settings:
    s = local_settings(tmp_path)
    cli_env(s)
    return s


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["nosuch"], "invalid choice: 'nosuch'"),
        (["verify", "--hourz", "x"], "unrecognized arguments"),
        (["late", "fold", "--topic", "orders", "--window-start", "yesterday"], "--window-start"),
        (["time-travel", "orders"], "--as-of"),
        (["generate", "--days", "many"], "invalid int value"),
        (["maintain", "--table"], "expected one argument"),
    ],
)
def test_bad_arguments_are_one_line_with_exit_2(
    settings: Settings, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    one_line(capsys, needle, "--help")


def test_bad_values_and_a_missing_landing_zone(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify"]) == 1
    one_line(capsys, f"landing zone {settings.landing_dir} does not exist", "LANDING_DIR")
    contract_hour(settings.landing_dir)
    assert main(["verify", "--hour", "2026-11-02 10:00"]) == 2
    one_line(capsys, "--hour", "expected YYYY-MM-DD-HH:MM")
    settings.landing_dir.joinpath("topics").rename(settings.landing_dir.parent / "moved")
    settings.landing_dir.rmdir()
    settings.landing_dir.write_text("not a directory")
    assert main(["verify"]) == 1
    one_line(capsys, "is not a directory")


def test_a_bad_setting_is_one_line(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PARTITIONS_START", "last tuesday")
    assert main(["verify"]) == 2
    one_line(capsys, "PARTITIONS_START", "expected YYYY-MM-DD-HH:MM")


def test_an_unreachable_catalog_is_one_line(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    contract_hour(settings.landing_dir)
    # port 9 (discard) on localhost: nothing listens, the connection is refused at once
    monkeypatch.setenv("ICEBERG_CATALOG_URI", "postgresql+psycopg2://root:secret@127.0.0.1:9/catalog")
    assert main(["verify"]) == 1
    line = one_line(capsys, "cannot reach the Iceberg catalog", "127.0.0.1:9", "ICEBERG_CATALOG_URI")
    assert "secret" not in line
    assert main(["maintain", "--dry-run"]) == 1
    one_line(capsys, "cannot reach the Iceberg catalog")
    assert main(["run"]) == 1  # before any run: not retried hour after hour
    one_line(capsys, "cannot reach the Iceberg catalog")


def test_time_travel_query_errors_are_one_line(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    contract_hour(settings.landing_dir)
    ingest_hour(settings, HOUR)
    now = (datetime.now(UTC) + timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
    base = ["time-travel", "bronze.orders", "--as-of", now]
    assert main([*base, "--sql", "select count(*) from t"]) == 2
    one_line(capsys, "the query failed", "t", '"orders" and "bronze"."orders"')
    assert main([*base, "--sql", "select cast(status as integer) from orders"]) == 2  # fails only when it runs
    one_line(capsys, "the query failed", "Conversion Error")
    assert main([*base, "--sql", "select count(*) from orders"]) == 0
    capsys.readouterr()
    assert main(["time-travel", "bronze.nosuch", "--as-of", now]) == 2
    one_line(capsys, "no Iceberg table bronze.nosuch")


def test_accept_type_and_rename_errors_are_one_line(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--accept-type", "orders.priority"]) == 1  # nothing ingested yet
    one_line(capsys, "bronze.orders", "run `logistics-platform run` first")
    contract_hour(settings.landing_dir)
    ingest_hour(settings, HOUR)  # orders gains tip_amount (double) and note (text)
    assert main(["run", "--accept-type", "returns.priority"]) == 2
    one_line(capsys, "no bronze table 'returns'", "orders")
    assert main(["run", "--accept-type", "orders.total_amount"]) == 2
    one_line(capsys, "bronze.orders.total_amount is a contract column", "have the source change reverted")
    for wrong in ("orders.priority", "orders", "orders.note"):  # no such column, none named, already text
        assert main(["run", "--accept-type", wrong]) == 2
        one_line(capsys, "bronze.orders has no column", "tip_amount", "the schema_incident check names")
    for wrong, words in (
        ("orders.region", ("expected TABLE.COLUMN=NEW", "orders.region=zone")),
        ("orders.order_id=id", ("bronze.orders.order_id is not a contract column", "the key cannot be renamed")),
        ("orders.region=status", ("'status' cannot be read as bronze.orders.region", "already a column")),
        ("orders.region=zone", ("no line of bronze.orders is quarantined as incompatible_type:region",)),
    ):
        assert main(["run", "--accept-rename", wrong]) == 2
        one_line(capsys, *words)
    assert main(["run", "--accept-type", "orders.note", "--accept-rename", "orders.region=zone"]) == 2
    one_line(capsys, "give one of them per run")


def test_a_duckdb_file_locked_by_another_process_names_it(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    settings.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.connect(str(settings.duckdb_path)).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time, duckdb
                con = duckdb.connect({str(settings.duckdb_path)!r})
                print("locked", flush=True)
                sys.stdin.read()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        assert main(["late", "list"]) == 1
        one_line(capsys, f"the DuckDB file {settings.duckdb_path} is locked by another process", f"PID {holder.pid}")
    finally:
        holder.communicate("")
    assert holder.returncode == 0


def test_debug_shows_the_traceback(settings: Settings) -> None:
    with pytest.raises(duckdb.IOException):
        main(["--debug", "late", "list"])


def test_the_console_script_prints_one_line(settings: Settings, tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "logistics-platform"
    done = subprocess.run([str(script), "verify"], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "landing zone" in done.stderr


def test_the_summary_after_a_failed_run_reports_and_does_not_crash(settings: Settings) -> None:
    contract_hour(settings.landing_dir)
    ingest_hour(settings, HOUR)
    # A failed dbt build leaves this process's read-write connection to the DuckDB file open; DuckDB then refuses
    # the summary's read-only connection ("different configuration"), which used to end `run` in a traceback.
    settings.duckdb_path.parent.mkdir(parents=True, exist_ok=True)
    dbt_like = duckdb.connect(str(settings.duckdb_path))
    dbt_like.execute("create schema marts; create table marts.fct_orders as select 1 as order_id")
    try:
        bronze, marts, error = table_counts(settings)
    finally:
        dbt_like.close()
    assert bronze["orders"] > 0 and marts == {}
    assert error.startswith(f"marts ({settings.duckdb_path}): ConnectionException") and "\n" not in error

    key = hour_key(HOUR)
    summary = Summary(
        partitions=[key],
        runs=[
            RunRecord("ingest_arrival_hours", key, "r-1", False, "bronze_ingest: not retried: ArrowTypeError", 2.54),
            RunRecord("ingest_arrival_hours", key, "r-2", True, "", 1.5),
        ],
        bronze=bronze,
        counts_error=error,
    )
    text = render_summary(summary)
    assert not summary.ok
    assert f"FAILED ingest_arrival_hours [{key}] run r-1: bronze_ingest: not retried: ArrowTypeError" in text
    assert "row counts unavailable: marts" in text and "bronze.orders" in text
    assert "runs: 2 (1 failed)" in text and "  ingest_arrival_hours: 2 runs, 4.0s" in text
    assert table_counts(settings)[1:] == ({"fct_orders": 1}, "")  # once the connection is gone
