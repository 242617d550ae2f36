"""Fuzz of the ingest: valid landing files of every topic, damaged at random (fixed seed), always fully accounted.

Every case must finish, and every line of the hour must end up in exactly one place: a bronze row, a quarantine
row, the tombstone count, or the readable prefix of a file recorded once as ``corrupt_file``. Lines of files the
case did not touch, and unchanged lines of the files it did, must come out exactly as in the clean ingest.
"""

from __future__ import annotations

import gzip
import random
import shutil
import zlib
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logistics_platform.generator import GeneratorConfig, generate
from logistics_platform.lib.bronze import schema as bs
from logistics_platform.lib.bronze.blocks import CorruptRead, iter_counted_blocks
from logistics_platform.lib.bronze.ingest import ingest_hour
from logistics_platform.lib.bronze.landing import (
    UTF8_BOM,
    CorruptFileError,
    LandingFile,
    is_tombstone_line,
    landing_file,
    list_hour_files,
    scan_file,
)
from logistics_platform.lib.connections import load_catalog
from logistics_platform.settings import Settings, local_settings
from tests.support.bronze import account_hour, iter_lines

SEED = 20261201
HOUR = datetime(2026, 11, 1, 0)
READER_CASES = 400  # cheap: the readers only
INGEST_CASES = 12  # each a full ingest of the hour with several damaged files
FILES_PER_CASE = 3


# ---------------------------------------------------------------------------------------------------------------
# Mutations: (raw file bytes, content bytes, gzipped, rng) -> new raw file bytes
# ---------------------------------------------------------------------------------------------------------------
def _pos(rng: random.Random, data: bytes) -> int:
    return rng.randrange(len(data) + 1)


def truncate(raw: bytes, rng: random.Random) -> bytes:
    return raw[: _pos(rng, raw)]


def bit_flips(raw: bytes, rng: random.Random) -> bytes:
    out = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def delete_bytes(raw: bytes, rng: random.Random) -> bytes:
    i = _pos(rng, raw)
    return raw[:i] + raw[i + rng.randint(1, 64) :]


def duplicate_bytes(raw: bytes, rng: random.Random) -> bytes:
    i = _pos(rng, raw)
    return raw[:i] + raw[i : i + rng.randint(1, 200)] + raw[i:]


def insert_newlines(raw: bytes, rng: random.Random) -> bytes:
    out = raw
    for _ in range(rng.randint(1, 5)):
        i = _pos(rng, out)
        out = out[:i] + rng.choice([b"\n", b"\r\n", b"\n\n"]) + out[i:]
    return out


def reencode(raw: bytes, rng: random.Random) -> bytes:
    lines = raw.split(b"\n")
    i = rng.randrange(len(lines))
    text = lines[i].decode("utf-8", errors="replace")
    how = rng.choice(["utf-16", "latin-1-accent", "bom-start", "bom-line", "crlf", "nul"])
    if how == "utf-16":
        lines[i] = text.encode("utf-16")
    elif how == "latin-1-accent":
        lines[i] = (text[:-1] + "é" + text[-1:]).encode("latin-1", errors="replace")
    elif how == "bom-start":
        return UTF8_BOM + raw
    elif how == "bom-line":
        lines[i] = UTF8_BOM + lines[i]
    elif how == "crlf":
        return raw.replace(b"\n", b"\r\n")
    else:
        lines[i] = lines[i][: len(lines[i]) // 2] + b"\x00" + lines[i][len(lines[i]) // 2 :]
    return b"\n".join(lines)


def line_edits(raw: bytes, rng: random.Random) -> bytes:
    lines = raw.split(b"\n")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        how = rng.choice(["dup", "del", "swap", "garbage", "empty", "null", "cut"])
        if how == "dup":
            lines.insert(i, lines[i])
        elif how == "del" and len(lines) > 1:
            del lines[i]
        elif how == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif how == "garbage":
            lines[i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        elif how == "empty":
            lines.insert(i, b"")
        elif how == "null":
            lines.insert(i, b"null")
        else:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    return b"\n".join(lines)


CONTENT_MUTATIONS: list[Callable[[bytes, random.Random], bytes]] = [
    truncate,
    bit_flips,
    delete_bytes,
    duplicate_bytes,
    insert_newlines,
    reencode,
    line_edits,
]


def gzip_damage(raw: bytes, rng: random.Random) -> bytes:
    how = rng.choice(["cut", "cut-trailer", "flip", "garbage-after", "second-member", "zero-padding", "not-gzip"])
    if how == "cut":
        return raw[: rng.randrange(len(raw))]
    if how == "cut-trailer":
        return raw[: -rng.randint(1, 8)]
    if how == "flip":
        return bit_flips(raw, rng)
    if how == "garbage-after":
        return raw + bytes(rng.randrange(1, 256) for _ in range(rng.randint(1, 30)))
    if how == "second-member":  # valid: gzip members in sequence
        return raw + gzip.compress(b'{"tail":1}\n', mtime=0)
    if how == "zero-padding":  # valid: zeros after the member
        return raw + b"\x00" * rng.randint(1, 20)
    return gzip.decompress(raw)  # plain text under a .gz name


def mutate(raw: bytes, gzipped: bool, rng: random.Random) -> bytes:
    """A damaged copy of a landed file: byte and line edits of its content, or damage of its gzip stream."""
    if gzipped and rng.random() < 0.5:
        return gzip_damage(raw, rng)
    content = gzip.decompress(raw) if gzipped else raw
    changed = rng.choice(CONTENT_MUTATIONS)(content, rng)
    return gzip.compress(changed, mtime=0) if gzipped else changed


# ---------------------------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------------------------
def readable(f: LandingFile) -> tuple[list[bytes], str | None]:
    """The accounting reader's view: complete lines before any damage, and the damage."""
    lines: list[bytes] = []
    try:
        for line in iter_lines(f):
            lines.append(line)
    except CorruptFileError as e:
        return lines, e.error
    return lines, None


def blocks_view(f: LandingFile, block_bytes: int) -> tuple[list[bytes], CorruptRead | None]:
    """The ingest reader's view, with small blocks to cross many block boundaries."""
    lines: list[bytes] = []
    try:
        for block, first, _ in iter_counted_blocks(f, block_bytes):
            assert first == f.start_offset + len(lines)
            part = block.split(b"\n")
            if block.endswith(b"\n"):
                part.pop()
            lines += part
    except CorruptRead as e:
        return lines, e
    return lines, None


def expected_content(raw: bytes, gzipped: bool) -> bytes | None:
    """What Python's gzip module makes of the file (None: it refuses it)."""
    if not gzipped:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error):
        return None


def split_lines(content: bytes) -> list[bytes]:
    if content.startswith(UTF8_BOM):
        content = content[len(UTF8_BOM) :]
    lines = content.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-landing")
    config = GeneratorConfig.clean(
        HOUR, hours=1, seed=7, orders_per_day=300, pings_per_day=1500, flush_size=40, tip_amount_from=None
    )
    generate(root, config)
    for i, path in enumerate(sorted((root / "topics").rglob("*.json"))):
        if i % 2:  # half of the files gzipped, as Kafka Connect may write them
            path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes(), mtime=0))
            path.unlink()
    return root


def _files(root: Path) -> list[LandingFile]:
    return [f for spec in bs.TOPICS.values() for f in list_hour_files(root, spec.topic, HOUR)]


def test_the_readers_agree_on_every_damaged_file(landing: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    originals = _files(landing)
    assert {f.topic for f in originals} == {s.topic for s in bs.TOPICS.values()}
    assert any(f.gzipped for f in originals) and not all(f.gzipped for f in originals)
    corrupt = 0
    for case in range(READER_CASES):
        source = rng.choice(originals)
        raw = mutate(source.path.read_bytes(), source.gzipped, rng)
        target = tmp_path / source.relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(raw)
        f = landing_file(tmp_path, target)
        lines, damage = readable(f)
        block_lines, cut = blocks_view(f, rng.choice([1, 7, 64, 4096, 1 << 20]))
        assert block_lines == lines, case
        assert (cut is None) == (damage is None), case
        counted = scan_file(f)  # the accounting counts a block at a time: the same lines, tombstones and damage
        assert counted == (len(lines), sum(map(is_tombstone_line, lines)), damage), case
        if cut is not None:
            corrupt += 1
            assert cut.offset == f.start_offset + len(lines) and cut.error.error == damage, case
            assert b"\n" not in cut.tail and f"file size {len(raw)} bytes" in cut.detail()
        content = expected_content(raw, f.gzipped)
        if damage is None:  # readable to the end: exactly what gzip reads, BOM at the start not a line's part
            assert content is not None and lines == split_lines(content), case
        elif content is not None:
            # gzip accepts what this reader refuses only for header flags that zlib checks and gzip ignores
            assert raw[:3] == b"\x1f\x8b\x08" and raw[3:4] != source.path.read_bytes()[3:4], case
        target.unlink()
    assert corrupt > READER_CASES // 10  # the mutations do damage files


# ---------------------------------------------------------------------------------------------------------------
# Full ingests
# ---------------------------------------------------------------------------------------------------------------
def _table_rows(settings: Settings, table: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    t = load_catalog(settings).load_table(f"bronze.{table}")
    scan = t.scan(row_filter=f"_arrival_hour = '{HOUR.isoformat()}'")
    data = scan.to_arrow()
    if columns is not None:
        data = data.select(columns)
    return data.to_pylist()  # type: ignore[no-any-return]


def _by_address(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:
        key = (r["_source_file"], r["_offset"])
        assert key not in out, f"two rows for {key}"
        out[key] = r
    return out


def test_every_line_ends_up_in_exactly_one_place(landing: Path, tmp_path: Path) -> None:
    settings = local_settings(tmp_path)
    shutil.copytree(landing, settings.landing_dir)
    ingest_hour(settings, HOUR)
    contract = {t: [c.name for c in bs.table_schema(spec).fields] for t, spec in bs.TOPICS.items()}
    baseline = {t: _by_address(_table_rows(settings, t, contract[t])) for t in bs.TOPICS}
    assert not _table_rows(settings, bs.QUARANTINE_TABLE)  # valid input: nothing quarantined
    originals = {f.relpath: f for f in _files(settings.landing_dir)}
    original_bytes = {rel: f.path.read_bytes() for rel, f in originals.items()}
    original_lines = {rel: readable(f)[0] for rel, f in originals.items()}
    rng = random.Random(SEED + 1)
    seen: Counter[str] = Counter()

    for case in range(INGEST_CASES):
        for rel, data in original_bytes.items():  # start each case from the clean hour
            originals[rel].path.write_bytes(data)
        damaged = rng.sample(sorted(originals), FILES_PER_CASE)
        for rel in damaged:
            originals[rel].path.write_bytes(mutate(original_bytes[rel], originals[rel].gzipped, rng))

        report = ingest_hour(settings, HOUR)  # must finish, whatever the damage

        files = {f.relpath: f for f in _files(settings.landing_dir)}
        assert set(files) == set(originals)
        quarantine = _table_rows(settings, bs.QUARANTINE_TABLE)
        corrupt_rows = {q["_source_file"]: q for q in quarantine if q["reason"] == bs.REASON_CORRUPT_FILE}
        line_rows = _by_address([q for q in quarantine if q["reason"] != bs.REASON_CORRUPT_FILE])
        for table, spec in bs.TOPICS.items():
            rows = _by_address(_table_rows(settings, table, contract[table]))
            for rel, f in files.items():
                if f.topic != spec.topic:
                    continue
                lines, damage = readable(f)
                tombstones = {f.start_offset + i for i, raw in enumerate(lines) if is_tombstone_line(raw)}
                stored = {o for (r, o) in rows if r == rel} | {o for (r, o) in line_rows if r == rel}
                assert not {o for (r, o) in rows if r == rel} & {o for (r, o) in line_rows if r == rel}
                # every readable line: a row, a quarantine row or a tombstone, exactly once
                assert stored | tombstones == set(range(f.start_offset, f.start_offset + len(lines))), (case, rel)
                assert not stored & tombstones, (case, rel)
                if damage is None:
                    assert rel not in corrupt_rows, (case, rel)
                else:
                    seen["corrupt_file"] += 1
                    assert corrupt_rows[rel]["_offset"] == f.start_offset + len(lines), (case, rel)
                    assert report.topics[table].corrupt_files[rel] == corrupt_rows[rel]["error_detail"]
                # a line identical to the clean file's line at the same offset is the same row as before
                for i, raw in enumerate(lines):
                    before = baseline[table].get((rel, f.start_offset + i))
                    if i < len(original_lines[rel]) and raw == original_lines[rel][i] and before is not None:
                        assert rows.get((rel, f.start_offset + i)) == before, (case, rel, i)
                if rel not in damaged:
                    assert {k: v for k, v in rows.items() if k[0] == rel} == {
                        k: v for k, v in baseline[table].items() if k[0] == rel
                    }, (case, rel)
        seen.update(q["reason"].split(":")[0] for q in line_rows.values())
        accounts = account_hour(settings, HOUR)
        assert all(a.balanced for a in accounts.values()), (case, accounts)
    assert seen["corrupt_file"] and seen["malformed_json"]  # the cases reach both kinds of damage
