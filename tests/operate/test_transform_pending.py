"""The transform sensor's bookkeeping: which ingested hours a successful run built, and which still wait."""

from __future__ import annotations

from logistics_platform.lib.operate.transform_pending import FOLD_OVERLAP_SECONDS, BuiltState

H0, H1, H2 = "2026-11-02-00:00", "2026-11-02-01:00", "2026-11-02-02:00"


def test_an_hour_waits_until_a_run_built_its_latest_ingest() -> None:
    state = BuiltState()
    ingested = {H0: 10, H1: 12}
    assert state.pending(ingested) == ingested
    state.fold([H0, H1], watermark=12, updated=100.0)
    assert state.pending(ingested) == {}
    # A delayed file re-ingests H0; H2 is ingested while a run of H0..H2 is in flight, after it read its watermark.
    ingested = {H0: 15, H1: 12, H2: 16}
    state.fold([H0, H1, H2], watermark=15, updated=200.0)
    assert state.pending(ingested) == {H2: 16}
    # Folding is idempotent, and an older run folded late never lowers what is built.
    state.fold([H0, H1, H2], watermark=15)
    state.fold([H2], watermark=9, updated=150.0)
    assert state.pending(ingested) == {H2: 16}
    assert state.seen_until == 200.0 and state.fold_after() == 200.0 - FOLD_OVERLAP_SECONDS


def test_old_built_hours_leave_the_cursor_and_stay_built_until_ingested_again() -> None:
    old = [f"2026-10-{d:02d}-05:00" for d in (1, 2, 3)]
    ingested = {old[0]: 1, old[1]: 2, old[2]: 30, H0: 40}
    state = BuiltState()
    state.fold([old[0], old[1], H0], watermark=40)
    # old[2] was never built: pending, and so never dropped, however old.
    pruned = state.prune(ingested, keep_days=7)
    assert set(pruned.built) == {old[2], H0} and pruned.floor == 2
    assert pruned.pending(ingested) == {old[2]: 30}
    # Round trip through the cursor.
    restored = BuiltState.load(pruned.dump())
    assert restored == pruned
    # A dropped hour ingested again (a backfill of bronze) has a newer id than the floor: pending again.
    assert restored.pending({**ingested, old[0]: 41}) == {old[0]: 41, old[2]: 30}


def test_a_rising_floor_never_hides_a_pending_hour() -> None:
    ingested = {"2026-10-01-00:00": 50, "2026-10-01-01:00": 20, H0: 60}
    state = BuiltState()
    state.fold(["2026-10-01-00:00"], watermark=55)
    pruned = state.prune(ingested, keep_days=7)
    assert pruned.floor == 50  # the dropped hour's ingest
    assert pruned.pending(ingested) == {"2026-10-01-01:00": 20, H0: 60}


def test_an_unreadable_cursor_starts_over() -> None:
    assert BuiltState.load(None) is None
    assert BuiltState.load("not json") is None
    assert BuiltState.load('{"v": 0, "built": {}}') is None
    assert BuiltState.load(BuiltState().dump()) == BuiltState()


def test_a_cursor_written_before_the_merge_still_loads() -> None:
    raw = '{"v":1,"floor":2,"seen_until":1764547200.5,"built":{"2026-11-02-00:00":40,"2026-11-02-01:00":41}}'
    state = BuiltState({H0: 40, H1: 41}, floor=2, seen_until=1764547200.5)
    assert BuiltState.load(raw) == state and state.dump() == raw
