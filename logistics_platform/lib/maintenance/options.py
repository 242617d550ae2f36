"""Knobs of the nightly maintenance, built from :class:`Settings` (tests pass small values)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from logistics_platform.settings import Settings

# How many previous metadata.json files a table keeps in its metadata log (and on storage).
DEFAULT_METADATA_PREVIOUS_VERSIONS = 50


@dataclass(frozen=True)
class Hooks:
    """Fault-injection points for tests: each gets the table identifier; raising there acts as a crash would."""

    before_compaction_commit: Callable[[str], None] | None = None
    after_expiry_commit: Callable[[str], None] | None = None


@dataclass(frozen=True)
class MaintenanceOptions:
    """What one maintenance run does; every threshold has a production default from the settings."""

    small_file_bytes: int = 32 * 1024 * 1024
    target_file_bytes: int = 128 * 1024 * 1024
    snapshot_retention: timedelta = timedelta(days=7)
    min_snapshots_to_keep: int = 10
    orphan_safety_window: timedelta = timedelta(days=3)
    max_manifests_per_snapshot: int = 10
    daily_tag_retention_days: int = 365
    metadata_previous_versions: int = DEFAULT_METADATA_PREVIOUS_VERSIONS
    dry_run: bool = False
    # "now" is a parameter so that tag days and age windows are testable; None = the wall clock.
    now: datetime | None = None
    hooks: Hooks = field(default_factory=Hooks)

    @classmethod
    def from_settings(cls, settings: Settings, dry_run: bool = False) -> MaintenanceOptions:
        return cls(
            small_file_bytes=settings.compaction_small_file_bytes,
            target_file_bytes=settings.compaction_target_file_bytes,
            snapshot_retention=timedelta(days=settings.snapshot_retention_days),
            min_snapshots_to_keep=settings.snapshot_min_keep,
            orphan_safety_window=timedelta(days=settings.orphan_safety_days),
            max_manifests_per_snapshot=settings.manifest_max_per_snapshot,
            daily_tag_retention_days=settings.daily_tag_retention_days,
            dry_run=dry_run,
        )

    def current_time(self) -> datetime:
        """The run's notion of now (timezone-aware UTC)."""
        now = self.now or datetime.now(UTC)
        return now if now.tzinfo else now.replace(tzinfo=UTC)
