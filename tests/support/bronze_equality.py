"""Compare the bronze tables two landings of the same change events gave, e.g. one engine run under two converter
configs: everything the platform builds below bronze reads bronze only, so equal bronze rows mean equal marts, and a
test can take one config through the whole pipeline and prove the others equal at bronze, at a fraction of the cost.
"""

from __future__ import annotations

from collections.abc import Iterable

from logistics_platform.lib.bronze.schema import QUARANTINE_TABLE
from logistics_platform.lib.connections import connect, load_catalog
from logistics_platform.settings import Settings

# Bronze columns that say where each landing put a record (its own files, .json or .avro, which a sink rolls at other
# points for Avro: on each new writer schema) or its connector's clock (one engine per config).
PER_LANDING_COLUMNS = ("_offset", "_source_file", "_connector_ts")
# Each engine takes its own initial snapshot: its op "r" rows carry that snapshot's position and time, so their
# event identity differs per engine (the streamed changes' does not: same LSN, same transaction).
PER_SNAPSHOT_COLUMNS = ("_event_id", "_event_time", "_lsn", "_tx_id", "_is_late", "_lateness_seconds")


def assert_same_bronze(reference: Settings, other: Settings, tables: Iterable[str]) -> dict[str, int]:
    """Table -> rows; fails naming the table on any difference of columns, types or rows (as multisets, both ways)
    between two catalogs' bronze tables, the per-landing columns aside, or when ``other`` quarantined a line."""
    ours, theirs = load_catalog(other), load_catalog(reference)
    assert len(ours.load_table(("bronze", QUARANTINE_TABLE)).scan().to_arrow()) == 0
    con = connect()
    counts = {}
    try:
        for table in tables:
            got = ours.load_table(("bronze", table)).scan().to_arrow()
            want = theirs.load_table(("bronze", table)).scan().to_arrow()
            got = got.drop_columns([c for c in PER_LANDING_COLUMNS if c in got.column_names])
            want = want.drop_columns([c for c in PER_LANDING_COLUMNS if c in want.column_names])
            assert got.schema == want.schema, f"bronze.{table}: {got.schema} vs the reference's {want.schema}"
            con.register("got", got)
            con.register("want", want)
            snapshot = [f"if(_op = 'r', null, {c}) as {c}" for c in PER_SNAPSHOT_COLUMNS if "_op" in got.column_names]
            rows = f"select * replace ({', '.join(snapshot)})" if snapshot else "select *"
            only_got = con.sql(f"{rows} from got except all {rows} from want").fetchall()
            only_want = con.sql(f"{rows} from want except all {rows} from got").fetchall()
            assert not only_got and not only_want, f"bronze.{table}: only here {only_got[:2]}, there {only_want[:2]}"
            assert len(got) > 0, f"bronze.{table} is empty on both sides"
            counts[table] = len(got)
    finally:
        con.close()
    return counts
