"""The served dashboard in headless Chromium: every page renders its charts and no error element; the off-route page
names the current episode and draws its map."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.browser import CHROMIUM, PAGES, free_port, look_at_pages, served_dashboard
from tests.support.dashboard_world import OFF_COURIER, OFF_ORDER, DashboardWorld

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_every_page_renders_in_chromium(dashboard_world: DashboardWorld, tmp_path: Path) -> None:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: `make browser` installs Debian's chromium"
    with served_dashboard(dashboard_world.settings, free_port(), tmp_path / "dashboard.log") as base:
        seen = look_at_pages(base, tmp_path / "screenshots", tmp_path / "profile")
    assert [p.title for p in seen] == [title for _, _, title in PAGES]
    for page in seen:
        assert page.errors == 0, f"{page.name}: an error element; see {page.screenshot}"
        assert page.charts >= 1, f"{page.name}: no chart drawn; see {page.screenshot}: {page.text}"
        # A screenshot of a drawn page, not an empty one (PNG of a full page at least a few kB).
        assert page.screenshot.stat().st_size > 10_000, page.name
    # The map page found the current episode (the world's courier riding off its corridor in the open hour).
    [off_route] = [p for p in seen if p.name == "off-route"]
    assert f"courier {OFF_COURIER} on order {OFF_ORDER} since" in off_route.text, off_route.text
    assert f"Courier {OFF_COURIER}, order {OFF_ORDER}" in off_route.text and off_route.charts == 2
