"""The accounting counts rows from the tables' manifests and lines a block at a time: the same figures as reading
every row and line, after compaction too, and a lost row still unbalances the hour."""

from __future__ import annotations

import gzip
from datetime import timedelta
from pathlib import Path

import pytest
from pyiceberg.expressions import And, EqualTo

from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.accounting import account_hours
from logistics_platform.lib.bronze.commit import hour_files
from logistics_platform.lib.bronze.ingest import ingest_hours
from logistics_platform.lib.bronze.landing import (
    CorruptFileError,
    is_tombstone_line,
    landing_file,
    scan_file,
)
from logistics_platform.lib.connections import load_catalog
from logistics_platform.lib.maintenance.compaction import compact_table
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import HOUR, contract_hour, iter_lines

HOURS = [HOUR, HOUR + timedelta(hours=1)]


def rows_read(settings: Settings, table: str) -> dict:
    """Hour -> rows of ``table``, every row read."""
    t = load_catalog(settings).load_table(f"{bs.NAMESPACE}.{table}")
    hours = t.scan(selected_fields=("_arrival_hour",)).to_arrow().column("_arrival_hour").to_pylist()
    return {h: hours.count(h) for h in HOURS}


@pytest.fixture
def two_hours(tmp_path: Path) -> Settings:
    settings = local_settings(tmp_path)
    for h in HOURS:
        contract_hour(settings.landing_dir, h)
    ingest_hours(settings, HOURS)
    return settings


def test_rows_from_manifests_equal_the_rows_read_before_and_after_compaction(two_hours: Settings) -> None:
    settings = two_hours
    before = account_hours(settings, HOURS)
    for h in HOURS:
        for table, acc in before[h].items():
            assert acc.balanced, acc
            assert acc.bronze_rows == rows_read(settings, table)[h] > 0, table
            assert (acc.quarantine_rows > 0 and acc.tombstones > 0) or table != "orders"
    orders = load_catalog(settings).load_table("bronze.orders")
    compact_table(orders, small_file_bytes=1 << 30, target_file_bytes=1 << 30)
    orders = load_catalog(settings).load_table("bronze.orders")
    # Both hours now share one file: its record count is not the hour's, so the hour is counted by a scan.
    assert all(hf.mixed and not hf.files for hf in hour_files(orders, "_arrival_hour", HOURS).values())
    assert account_hours(settings, HOURS) == before


def test_a_lost_row_unbalances_its_hour(two_hours: Settings) -> None:
    settings = two_hours
    catalog = load_catalog(settings)
    orders = catalog.load_table("bronze.orders")
    row = orders.scan(row_filter=EqualTo("_arrival_hour", HOUR.isoformat())).to_arrow().slice(0, 1).to_pylist()[0]
    orders.delete(And(EqualTo("_event_id", row["_event_id"]), EqualTo("_arrival_hour", HOUR.isoformat())))
    quarantine = catalog.load_table("bronze.quarantine")
    q_row = quarantine.scan(row_filter=EqualTo("_arrival_hour", HOURS[1].isoformat())).to_arrow().to_pylist()[0]
    quarantine.delete(And(EqualTo("_source_file", q_row["_source_file"]), EqualTo("_offset", q_row["_offset"])))
    accounts = account_hours(settings, HOURS)
    lost = accounts[HOUR]["orders"]
    assert not lost.balanced and lost.lines > lost.bronze_rows + lost.quarantine_rows + lost.tombstones
    assert lost.bronze_rows == rows_read(settings, "orders")[HOUR]
    assert not accounts[HOURS[1]][bs.TOPIC_BY_NAME[q_row["_topic"]].table].balanced
    assert accounts[HOURS[1]]["orders"].balanced or q_row["_topic"] == bs.TOPICS["orders"].topic


def _old_count(path: Path, root: Path) -> tuple[int, int, str | None]:
    """Lines and tombstones as the accounting counted them line by line."""
    lines = tombstones = 0
    try:
        for raw in iter_lines(landing_file(root, path)):
            lines += 1
            tombstones += is_tombstone_line(raw)
    except CorruptFileError as e:
        return lines, tombstones, e.error
    return lines, tombstones, None


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"null",
        b"null\n\n \tnull\r\nnull",  # adjacent tombstones, blank lines, CRLF, no final newline
        b'{"schema":{"payload": null},"payload" : null}\n{"schema":1,"payload":null}\n{"payload":null,"x":1}\n',
        b'{"a":"' + b"x" * 3_000_000 + b'"}\nnull\n{"schema":{},"payload":null}',  # a line over several blocks
        b'{"before":null,"after":{"id":1},"op":"c"}\n' * 50_000,
    ],
)
@pytest.mark.parametrize("gz", [False, True])
def test_block_counts_equal_line_by_line_counts(tmp_path: Path, content: bytes, gz: bool) -> None:
    path = tmp_path / "topics/t/dt=2026-11-02/hr=10" / f"t+0+0000000000.json{'.gz' if gz else ''}"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(content) if gz else content)
    assert tuple(scan_file(landing_file(tmp_path, path))) == _old_count(path, tmp_path)
    if gz and content:  # cut short: the complete lines before the damage, as before
        path.write_bytes(gzip.compress(content)[:-9])
        counted = scan_file(landing_file(tmp_path, path))
        assert counted.corrupt is not None and tuple(counted) == _old_count(path, tmp_path)
