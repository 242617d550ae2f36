"""Serve the dashboard as `make dashboard` does and look at each page in Debian's headless Chromium (Playwright).

Used by the browser test and by scripts/dashboard_screenshots.py. Playwright drives the system browser through
``executable_path``; it never downloads one.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from logistics_platform.settings import Settings, subprocess_env
from tests.support.processes import stop

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# (name, url path, title the page shows); the default page is served at the root.
PAGES = (
    ("sla", "", "SLA now"),
    ("delivery", "delivery", "Delivery time per region"),
    ("off-route", "off-route", "Couriers off route"),
    ("revenue", "revenue", "Daily revenue by tenant and tier"),
    ("time-travel", "time-travel", "Time travel"),
    ("health", "health", "Pipeline health"),
)
# Bounds on waiting, not expectations: a slow machine only waits longer, up to these.
START_ATTEMPTS = 240
PAGE_WAIT_MS = 120_000
# An exception in a page, or Streamlit's dialog for a URL that is no page.
# A chart Vega has drawn into (a canvas or an svg, once its data arrived).
DRAWN_CHART = '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg'
ERROR_SELECTORS = ('[data-testid="stException"]', '[data-testid="stExceptionMessage"]', 'text="Page not found"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served_dashboard(settings: Settings, port: int, log: Path) -> Iterator[str]:
    """`logistics-platform dashboard --port PORT` on ``settings``; yields its base URL once it answers."""
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "logistics-platform"), "dashboard", "--port", str(port)],
            env={**subprocess_env(settings), "DO_NOT_TRACK": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            for _ in range(START_ATTEMPTS):
                if proc.poll() is not None:
                    raise AssertionError(f"the dashboard exited with {proc.returncode}: {log.read_text()[-2000:]}")
                try:
                    with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                        if r.read() == b"ok":
                            break
                except OSError:
                    time.sleep(0.5)
            else:
                raise AssertionError(f"the dashboard never answered on {base}: {log.read_text()[-2000:]}")
            yield base
        finally:
            stop(proc)


@dataclass(frozen=True)
class PageSeen:
    name: str
    title: str
    charts: int
    errors: int
    screenshot: Path
    # The page's text (its first 4,000 characters): what it names, or why it drew no chart.
    text: str = ""


def look_at_pages(base: str, out_dir: Path, profile: Path, width: int = 1440, height: int = 2000) -> list[PageSeen]:
    """Open every page in a fresh Chromium profile, wait for its script to finish and its charts to draw, and
    screenshot it (``out_dir/dashboard-<name>.png``). Streamlit scrolls inside its own container, so a full-page
    screenshot is only the viewport: ``height`` is what the screenshot shows."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    seen = []
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": width, "height": height},
        )
        try:
            page = context.new_page()
            for name, path, title in PAGES:
                page.goto(f"{base}/{path}", wait_until="domcontentloaded")
                page.get_by_role("heading", name=title).first.wait_for(timeout=PAGE_WAIT_MS)
                page.wait_for_selector('[data-test-script-state="notRunning"]', timeout=PAGE_WAIT_MS)
                errors = sum(page.locator(sel).count() for sel in ERROR_SELECTORS)
                drawn = page.locator(DRAWN_CHART)
                if not errors:
                    # Every page draws a chart: wait for one rather than trust the script state alone, which a
                    # page's first run can report as finished before its elements arrived.
                    with suppress(PlaywrightTimeout):
                        drawn.first.wait_for(timeout=PAGE_WAIT_MS)
                page.wait_for_load_state("networkidle", timeout=PAGE_WAIT_MS)
                errors = sum(page.locator(sel).count() for sel in ERROR_SELECTORS)
                shot = out_dir / f"dashboard-{name}.png"
                page.screenshot(path=str(shot))
                charts = page.locator('[data-testid="stVegaLiteChart"]').count() if drawn.count() else 0
                text = " ".join(page.inner_text("body").split())[:4000]
                seen.append(PageSeen(name, title, charts, errors, shot, text))
        finally:
            context.close()
    return seen
