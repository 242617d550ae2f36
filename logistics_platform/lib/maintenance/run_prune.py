"""Which finished runs are superseded: none of their events is the latest of its kind (docs/operations.md)."""

from collections.abc import Collection, Hashable, Mapping


def superseded(events: Mapping[str, Collection[Hashable]], latest: Mapping[Hashable, str]) -> list[str]:
    """Of ``events`` (run id -> the kinds of its events: an asset partition, a check, an hour it built), the runs that
    hold the latest event of no kind; ``latest`` maps a kind to the run holding its latest (a kind not in it keeps)."""
    return [run for run, kinds in events.items() if all(latest.get(kind, run) != run for kind in kinds)]
