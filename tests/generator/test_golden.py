"""The generator's output is pinned: a small config with every anomaly on gives the recorded bytes.

``golden_digests.json`` holds, per topic, one sha256 over the sorted ``path sha256 mtime`` lines of its files
(the mtime is part of the output: delayed files show up late through it), and the sha256 of ``_generation.json``.
A change that alters any landed byte, file name, file split or mtime fails here; when the change is meant to
alter the output, re-record with ``python -m tests.generator.test_golden`` and say so in the commit.
The digests depend on the pinned pyarrow (its seeded random kernels) and zlib (gzip bytes).

``CONFIG`` has the Connect Decimal and Avro rates at 0: its landed files are those recorded before those encodings
existed (only ``_generation.json`` changed: the config and counters it holds gained fields). ``MIXED`` is the same
config with both on (``golden_digests_mixed.json``), re-recorded when fastavro came to write the Avro files: its
container header holds the schema as ``json.dumps`` writes it (with spaces) and a negative decimal may take one byte
more, so those files' bytes changed; their decoded records, codecs and blocks were compared equal to the hand-written
encoder's, and every other file stayed byte for byte.

Both were re-recorded when orders gained their coordinates (``coordinates_from``, on by default from a quarter of the
period): with ``coordinates_from=None`` both configs still give the earlier digests of every topic (only
``_generation.json`` differs, its config gained the field), so the coordinates changed nothing else; with them on,
the orders' lines are longer, and the LSNs and files of every CDC topic and the couriers' trips follow.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from logistics_platform.generator import GENERATION_FILE, GeneratorConfig, generate

FIXTURE = Path(__file__).with_name("golden_digests.json")
FIXTURE_MIXED = Path(__file__).with_name("golden_digests_mixed.json")

# Every anomaly and business case at a rate high enough to occur in a few thousand lines, on a period long
# enough for courier deletes (12 h), delayed files and a fractional allowed lateness (L = 1.5 h).
CONFIG = GeneratorConfig(
    start=datetime(2026, 11, 1, 6),
    hours=14,
    seed=2026,
    tenants=4,
    couriers=30,
    orders_per_day=1500,
    pings_per_day=12_000,
    partitions={"orders": 2, "payments": 2, "tracking_pings": 3},
    flush_size=250,
    allowed_lateness_hours=1.5,
    duplicate_rate=0.05,
    out_of_order_rate=0.05,
    late_within_rate=0.05,
    late_beyond_rate=0.04,
    delete_rate=0.04,
    snapshot_rate=0.05,
    malformed_json_rate=0.01,
    invalid_op_rate=0.01,
    missing_key_rate=0.01,
    invalid_value_rate=0.01,
    invalid_envelope_rate=0.01,
    schema_envelope_rate=0.2,
    gzip_rate=0.4,
    decimal_number_rate=0.05,
    epoch_micros_rate=0.05,
    delayed_files=3,
    delayed_file_hours=2,
    tip_amount_from=0.4,
    cancel_rate=0.08,
    refund_rate=0.05,
    payment_mismatch_rate=0.05,
    failed_payment_rate=0.05,
    tier_changes=3,
    noop_updates=2,
    precise_decimal_rate=0.0,
    avro_file_rate=0.0,
)
MIXED = replace(CONFIG, precise_decimal_rate=0.2, avro_file_rate=0.2)


def digests(root: Path) -> dict[str, Any]:
    """Per topic: file count and one sha256 over its sorted ``path sha256 mtime`` lines; the summary's sha256."""
    listing: dict[str, list[str]] = {}
    for path in sorted((root / "topics").rglob("*")):
        if path.is_file():
            rel = path.relative_to(root).as_posix()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            listing.setdefault(rel.split("/")[1], []).append(f"{rel} {digest} {int(os.stat(path).st_mtime)}\n")
    out: dict[str, Any] = {
        topic: {"files": len(lines), "sha256": hashlib.sha256("".join(lines).encode()).hexdigest()}
        for topic, lines in sorted(listing.items())
    }
    out[GENERATION_FILE] = hashlib.sha256((root / GENERATION_FILE).read_bytes()).hexdigest()
    return out


def test_output_is_byte_identical_to_the_recorded_digests(tmp_path: Path) -> None:
    summary = generate(tmp_path, CONFIG)
    # the config really has every anomaly in its output (else the pin would not cover it)
    totals = summary["totals"]
    assert set(totals["quarantine"]) == {
        "malformed_json",
        "invalid_op",
        "missing_key",
        "invalid_value",
        "invalid_envelope",
    }
    assert totals["duplicates"] and totals["late_lines"] and totals["out_of_order_lines"] and totals["tombstones"]
    assert totals["gzip_files"] and totals["schema_envelopes"] and len(summary["delayed_files"]) == 3
    assert all(t["ops"]["r"] for t in summary["topics"].values() if t["table"] != "tracking_pings")
    assert digests(tmp_path) == json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_mixed_encodings_output_is_byte_identical_to_the_recorded_digests(tmp_path: Path) -> None:
    summary = generate(tmp_path, MIXED)
    assert summary["totals"]["avro_files"] and sum(t["precise_decimals"] for t in summary["topics"].values())
    assert digests(tmp_path) == json.loads(FIXTURE_MIXED.read_text(encoding="utf-8"))


if __name__ == "__main__":
    import tempfile

    for cfg, fixture in ((CONFIG, FIXTURE), (MIXED, FIXTURE_MIXED)):
        with tempfile.TemporaryDirectory() as tmp:
            generate(tmp, cfg)
            fixture.write_text(json.dumps(digests(Path(tmp)), indent=2) + "\n", encoding="utf-8")
        print(f"recorded {fixture}")
