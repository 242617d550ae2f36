"""Landing discovery: path parsing, hour listing, file order, fingerprints, line and tombstone counts."""

from __future__ import annotations

from datetime import datetime

import pytest

from logistics_platform.lib.bronze.landing import (
    LandingPathError,
    fingerprint,
    is_tombstone_line,
    list_arrival_hours,
    list_hour_files,
    parse_landing_path,
)
from tests.support.bronze import iter_lines, write_file

H = datetime(2026, 11, 2, 10)


def test_parse_landing_path():
    rel = "topics/oltp.public.orders/dt=2026-11-02/hr=10/oltp.public.orders+3+0000001200.json.gz"
    assert parse_landing_path(rel) == ("oltp.public.orders", H, 3, 1200)


@pytest.mark.parametrize(
    "rel",
    [
        "topics/t/dt=2026-11-02/hr=10/t+0+12.json",  # offset not 10 digits
        "topics/t/dt=2026-11-02/hr=10/u+0+0000000000.json",  # topic differs from folder
        "topics/t/dt=2026-13-02/hr=10/t+0+0000000000.json",
        "topics/t/dt=2026-11-02/hr=24/t+0+0000000000.json",
        "topics/t/dt=2026-11-02/t+0+0000000000.json",
        "other/t/dt=2026-11-02/hr=10/t+0+0000000000.json",
        "topics/t/dt=2026-11-02/hr=10/t+0+0000000000.csv",
    ],
)
def test_parse_landing_path_rejects(rel):
    with pytest.raises(LandingPathError):
        parse_landing_path(rel)


def test_listing(tmp_path):
    write_file(tmp_path, "a.b", H, 1, 10, [b"1"])
    write_file(tmp_path, "a.b", H, 0, 20, [b"1"], gz=True)
    write_file(tmp_path, "a.b", H, 0, 5, [b"1"])
    write_file(tmp_path, "c", datetime(2026, 11, 3, 0), 0, 0, [b"1"])
    (tmp_path / "topics/a.b/dt=2026-11-02/hr=10/a.b+0+0000000099.json.tmp").write_text("partial")
    (tmp_path / "topics/c/dt=2026-11-01/hr=05").mkdir(parents=True)  # empty hour folder: not an arrival hour
    files = list_hour_files(tmp_path, "a.b", H)
    assert [(f.kafka_partition, f.start_offset, f.gzipped) for f in files] == [
        (0, 5, False),
        (0, 20, True),
        (1, 10, False),
    ]
    assert all(f.arrival_hour == H and f.topic == "a.b" and f.size > 0 for f in files)
    assert list_arrival_hours(tmp_path) == [H, datetime(2026, 11, 3, 0)]
    assert list_arrival_hours(tmp_path, ["c"]) == [datetime(2026, 11, 3, 0)]
    assert list_hour_files(tmp_path, "nope", H) == []
    assert list_arrival_hours(tmp_path / "missing") == []


def test_fingerprint_changes_with_names_and_sizes_only(tmp_path):
    write_file(tmp_path, "t", H, 0, 0, [b"a"])
    fp1 = fingerprint(list_hour_files(tmp_path, "t", H))
    assert fp1 == fingerprint(reversed(list_hour_files(tmp_path, "t", H)))
    write_file(tmp_path, "t", H, 0, 1, [b"b"])  # a delayed file
    fp2 = fingerprint(list_hour_files(tmp_path, "t", H))
    assert fp2 != fp1
    assert fingerprint([]) != fp1


def test_lines_and_tombstones(tmp_path):
    from logistics_platform.lib.bronze.landing import scan_file

    path = write_file(tmp_path, "t", H, 0, 0, [b'{"a":1}', b"null", b'{"schema":null,"payload":null}', b""], gz=True)
    (f,) = list_hour_files(tmp_path, "t", H)
    assert f.path == path
    assert list(iter_lines(f)) == [b'{"a":1}', b"null", b'{"schema":null,"payload":null}', b""]
    assert scan_file(f)[:2] == (4, 2)
    # no trailing newline: the last line still counts
    path2 = tmp_path / "topics/t/dt=2026-11-02/hr=10/t+1+0000000000.json"
    path2.write_bytes(b"null\n{}")
    assert scan_file(list_hour_files(tmp_path, "t", H)[1])[:2] == (2, 1)
    assert not is_tombstone_line(b'{"payload":null,"x":1}')
    assert not is_tombstone_line(b"\x0cnull")  # not JSON whitespace: malformed, as the parser says
    assert not is_tombstone_line(b'{"payload":null')
    assert is_tombstone_line(b'{"schema":{"type":"struct"},"payload":null}')
