"""What the browser tests share, over ``bench/browser_harness.py`` (the system Chromium, a real
`streamlit run app.py`): Playwright's sync API checked first, a server that fails the test with
its log's tail, one Chromium per module, and a visitor's page at a given window size.

The server's port is ``PROFILER_LAB_TEST_PORT`` when set (a shared box gives each engineer a
range of ports), else a free one. Screenshots and server logs go to artifacts/ (git-ignored).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import browser_harness as harness  # noqa: E402  (bench/ is not a package)

SERVER_START_S = harness.SERVER_START_S
wait_page_idle = harness.wait_page_idle

__all__ = ["ARTIFACTS", "PORT_ENV", "SERVER_START_S", "app_server", "chromium", "open_app", "open_app_ready",
           "sync_api", "wait_page_idle"]

ARTIFACTS = ROOT / "artifacts"
PORT_ENV = "PROFILER_LAB_TEST_PORT"


def sync_api():
    """Playwright's sync API, checked before any server starts (skip, or fail in CI, at once)."""
    harness.require_browser()
    from playwright import sync_api as api

    return api


@contextmanager
def app_server(log_name: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """A healthy server's URL, with ``env`` added to its environment; a server that does not
    come up fails the test with its log's tail. Stopped, with its workers, whatever happens."""
    ARTIFACTS.mkdir(exist_ok=True)
    port = int(os.environ.get(PORT_ENV, "0")) or None
    try:
        with harness.streamlit_server(ARTIFACTS / log_name, port=port, env=env) as (url, _process):
            yield url
    except harness.ServerFailed as exc:
        pytest.fail(str(exc))


@contextmanager
def chromium(api) -> Iterator:
    """One headless Chromium (the system's, with the harness's flags), closed after."""
    with api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_app(browser, url: str, *, width: int = 1280, height: int = 900, timeout_s: float = 120, **options):
    """A new visitor (a browser context of its own) on ``url`` in a ``width``×``height`` window."""
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    context.set_default_timeout(timeout_s * 1000)
    page = context.new_page()
    page.goto(url)
    return page


def open_app_ready(api, browser, url: str, *, width: int, height: int, ui_s: float, run_s: float):
    """``open_app``, then wait until its first page run drew the Summary tab and went idle."""
    page = open_app(browser, url, width=width, height=height, timeout_s=ui_s)
    api.expect(page.get_by_role("tab", name="Summary", exact=True)).to_be_visible(timeout=SERVER_START_S * 1000)
    wait_page_idle(page, run_s)
    return page


def open_sidebar(api, page) -> None:
    """Open the sidebar where a narrow window folded it, as a visitor does to run a profile."""
    bar = page.locator('[data-testid="stSidebar"]')
    if bar.get_attribute("data-collapsed") == "true":
        page.locator('[data-testid="stExpandSidebarButton"]').first.click()
        api.expect(bar).to_have_attribute("data-collapsed", "false")
        page.wait_for_timeout(600)  # its slide-in


def pick_lesson(page, title: str, *, run_s: float, tries: int = 5) -> None:
    """Choose the lesson titled ``title`` in the sidebar and wait for the page run it starts (a click
    that lands while the page redraws only focuses the box, so it is tried again)."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text="Lesson")
    option = page.get_by_role("option", name=title)
    for _ in range(tries):
        box.click()
        page.wait_for_timeout(1000)
        if option.is_visible():
            break
        page.keyboard.press("Escape")
    option.click()
    wait_page_idle(page, run_s)
