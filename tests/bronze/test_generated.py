"""Bronze on the generator's realistic landing zone: exact counts against what the generator says it wrote."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import list_arrival_hours
from logistics_platform.lib.connections import load_catalog
from logistics_platform.settings import local_settings
from tests.support.bronze import account_hour

START = datetime(2026, 11, 1)
HOURS = 6


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("bronze_generated")
    settings = local_settings(root)
    summary = generate(
        settings.landing_dir,
        GeneratorConfig(
            start=START,
            hours=HOURS,
            seed=11,
            orders_per_day=1200,
            pings_per_day=4800,
            malformed_json_rate=0.01,
            invalid_op_rate=0.01,
            missing_key_rate=0.01,
            invalid_value_rate=0.01,
            invalid_envelope_rate=0.01,
            delete_rate=0.05,
            delayed_files=1,
        ),
    )
    # Hold the delayed file back: it "arrives" after its hour was ingested once.
    delayed = summary["delayed_files"][0]
    delayed_path = settings.landing_dir / delayed["path"]
    held = root / "held.bin"
    delayed_path.rename(held)
    first = {h: ingest_hour(settings, h, run_id=f"first-{h:%H}") for h in list_arrival_hours(settings.landing_dir)}
    held.rename(delayed_path)
    delayed_hour = datetime.fromisoformat(delayed["arrival_hour"])
    reports = dict(first)
    reports[delayed_hour] = ingest_hour(settings, delayed_hour, run_id="after-delay")
    return settings, summary, first, reports, delayed_hour


def test_every_hour_matches_the_generator_and_balances(world):
    settings, summary, _, reports, _ = world
    assert len(reports) >= HOURS
    for topic, hours in summary["per_hour"].items():
        for hour_text, exp in hours.items():
            hour = datetime.fromisoformat(hour_text)
            tr = next(t for t in reports[hour].topics.values() if t.topic == topic)
            got = {
                "lines": tr.lines,
                "rows": tr.rows,
                "quarantined": tr.quarantined,
                "tombstones": tr.tombstones,
                "late": tr.late_events,
                "files": len(tr.files),
            }
            assert got == exp, (topic, hour_text)
    for hour in reports:
        for table, acc in account_hour(settings, hour).items():
            assert acc.balanced, (hour, table, acc)


def test_every_quarantine_reason_is_exact(world):
    settings, summary, first, reports, delayed_hour = world
    # The delayed file was appended to its hour: that ingest's reasons are those of the lines it read.
    assert reports[delayed_hour].mode == "append"
    for topic, exp in summary["topics"].items():
        got: Counter[str] = Counter()
        for r in [*first.values(), reports[delayed_hour]]:
            got.update(next(t for t in r.topics.values() if t.topic == topic).quarantined_by_reason)
        assert dict(got) == exp["quarantine"], topic
    reasons = {r.split(":")[0] for t in summary["topics"].values() for r in t["quarantine"]}
    assert reasons == {"malformed_json", "invalid_op", "missing_key", "invalid_value", "invalid_envelope"}
    q = load_catalog(settings).load_table("bronze.quarantine").scan().to_arrow()
    assert len(q) == summary["totals"]["quarantined"]


def test_tombstones_gzip_and_both_envelopes_are_ingested(world):
    _, summary, _, reports, _ = world
    totals = summary["totals"]
    assert totals["tombstones"] > 0 and totals["gzip_files"] > 0 and totals["schema_envelopes"] > 0
    assert sum(r.tombstones for r in reports.values()) == totals["tombstones"]
    assert sum(r.lines for r in reports.values()) == totals["lines"]


def test_delayed_file_is_picked_up(world):
    _, summary, first, reports, delayed_hour = world
    lines = summary["delayed_files"][0]["lines"]
    assert reports[delayed_hour].lines == first[delayed_hour].lines + lines


def test_added_column_reads_null_on_earlier_rows(world):
    settings, summary, _, _, _ = world
    orders = load_catalog(settings).load_table("bronze.orders")
    assert "tip_amount" in orders.schema().column_names
    data = orders.scan(selected_fields=("tip_amount", "_arrival_hour")).to_arrow().to_pylist()
    tip_from = datetime.fromisoformat(summary["tip_amount_from"])
    before = [r for r in data if r["_arrival_hour"] < tip_from]
    assert before and all(r["tip_amount"] is None for r in before)
    assert any(r["tip_amount"] is not None for r in data)
