"""The upload trap in a real browser: a refused file left in the uploader must not
poison the next one. With a file refused, a good trace added beside it with "+" used to make the
two a group of ranks that could never open; only the old error stayed, and a second bad file's
own message never showed.

A server of its own (`streamlit run app.py`), a visitor per case (tests/browser_pages.py: the
port is ``PROFILER_LAB_TEST_PORT`` when set, else a free one).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from tests.browser_pages import (
    ARTIFACTS,
    app_server,
    open_app_ready,
    wait_page_idle,
)

ROOT = Path(__file__).resolve().parents[1]
GOOD = ROOT / "tests" / "data" / "matmul_add_1024_fp32.json.gz"
UI_S = 120
RUN_S = 300

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def server(playwright_api):
    with app_server("browser_upload_server.log") as url:
        yield url


@pytest.fixture(params=[1280, 800])
def visitor(request, browser, server, playwright_api):
    page = open_app_ready(playwright_api, browser, server, width=request.param, height=1400, ui_s=UI_S, run_s=RUN_S)
    try:
        yield page
    finally:
        page.context.close()


def main(page):
    return page.locator('[data-testid="stMain"]')


def add_file(page, path: Path) -> None:
    """What "+" (or a drop) does: the file joins those already in the uploader."""
    uploader = main(page).locator('[data-testid="stFileUploader"]')
    if not uploader.is_visible():
        main(page).get_by_text("Open your own trace").click()
    uploader.locator('input[type="file"]').set_input_files(str(path))
    wait_page_idle(page, RUN_S)


def showing(page) -> str:
    box = main(page).locator('[data-testid="stSelectbox"]').filter(has_text="Showing")
    return box.locator("input").input_value()


def alerts(page) -> list[str]:
    return main(page).locator('[data-testid="stAlertContentError"]').all_inner_texts()


def remove_file(page, name: str) -> None:
    """The "×" beside ``name`` in the uploader's list."""
    main(page).get_by_role("button", name=f"Remove {name}", exact=True).click()
    wait_page_idle(page, RUN_S)


def _bad_files(tmp_path: Path) -> tuple[Path, Path]:
    garbage = tmp_path / "notes.json"
    garbage.write_bytes(b"this is not a trace {")
    truncated = tmp_path / "cut.json.gz"
    truncated.write_bytes(gzip.compress(gzip.decompress(GOOD.read_bytes())[:4000]))
    return garbage, truncated


def test_refused_file_then_good_one_added_with_plus_opens_the_good_one(visitor, tmp_path, playwright_api):
    expect = playwright_api.expect
    garbage, truncated = _bad_files(tmp_path)
    add_file(visitor, garbage)
    expect(main(visitor).get_by_text("notes.json cannot be opened")).to_be_visible(timeout=RUN_S * 1000)
    # A second bad file beside the first: its own message shows too, the first one's stays.
    add_file(visitor, truncated)
    expect(main(visitor).get_by_text("cut.json.gz cannot be opened")).to_be_visible(timeout=RUN_S * 1000)
    expect(main(visitor).get_by_text("notes.json cannot be opened")).to_be_visible(timeout=RUN_S * 1000)
    add_file(visitor, GOOD)
    expect(main(visitor).locator('[data-testid="stSelectbox"]').filter(has_text="Showing")
           .locator("input")).to_have_value(f"Upload: {GOOD.name}", timeout=RUN_S * 1000)
    wait_page_idle(visitor, RUN_S)
    said = alerts(visitor)
    assert any("notes.json cannot be opened" in a for a in said), said  # the refusal is still said
    assert any("cut.json.gz cannot be opened" in a for a in said), said
    assert not any("ranks" in a for a in said), said  # never a group of ranks
    visitor.screenshot(path=str(ARTIFACTS / f"browser_upload_trap_{visitor.viewport_size['width']}.png"))
    # "×" on the bad ones: the good trace stays shown, their messages go.
    remove_file(visitor, "notes.json")
    remove_file(visitor, "cut.json.gz")
    assert showing(visitor) == f"Upload: {GOOD.name}"
    assert alerts(visitor) == []


def test_refused_file_removed_with_x_then_good_one_opens(visitor, tmp_path, playwright_api):
    garbage, _ = _bad_files(tmp_path)
    add_file(visitor, garbage)
    playwright_api.expect(main(visitor).get_by_text("notes.json cannot be opened")).to_be_visible(timeout=RUN_S * 1000)
    remove_file(visitor, "notes.json")
    assert alerts(visitor) == []
    add_file(visitor, GOOD)
    playwright_api.expect(main(visitor).locator('[data-testid="stSelectbox"]').filter(has_text="Showing")
                          .locator("input")).to_have_value(f"Upload: {GOOD.name}", timeout=RUN_S * 1000)
    assert alerts(visitor) == []


def _reader_counts(page) -> tuple[int, int, int]:
    """(traces read, refused or failed, reader restarts) from the host's Server status, as the
    last page run drew it (a visitor of a server without a passcode is its host)."""
    side = page.locator('[data-testid="stSidebar"]')
    status = side.locator('[data-testid="stText"]').filter(has_text="traces read")
    if not status.is_visible():
        side.get_by_text("Server status (for the host)").click()
    text = status.inner_text(timeout=UI_S * 1000)
    served, failed = map(int, re.search(r"traces read: (\d+) \(refused or failed: (\d+)\)", text).groups())
    return served, failed, sum(int(n) for n in re.findall(r"(\d+) restarts", text))


def test_an_upload_is_read_once_by_the_read_begun_on_its_arrival(browser, server, playwright_api, tmp_path):
    """ui.early_read in the real server: the file's PUT queues the read, the page run that brings
    the file claims it. Claimed under another session's id (or not at all), the page would read
    the file a second time and cancel the first read (a reader killed: a restart), or count two
    reads; one upload must cost one read and the own-trace lesson's one job, nothing refused."""
    page = open_app_ready(playwright_api, browser, server, width=1280, height=1400, ui_s=UI_S, run_s=RUN_S)
    try:
        before = _reader_counts(page)
        own = tmp_path / "own_step.json.gz"  # bytes of its own: no result kept from another test's upload
        own.write_bytes(gzip.compress(gzip.decompress(GOOD.read_bytes()) + b"\n"))
        add_file(page, own)
        playwright_api.expect(main(page).locator('[data-testid="stSelectbox"]').filter(has_text="Showing")
                              .locator("input")).to_have_value(f"Upload: {own.name}", timeout=RUN_S * 1000)
        wait_page_idle(page, RUN_S)
        page.locator("body").press("r")  # a page run after the read, so the status is drawn anew
        wait_page_idle(page, RUN_S)
        served, failed, restarts = _reader_counts(page)
        assert (served - before[0], failed - before[1], restarts - before[2]) == (2, 0, 0), (before, served, failed,
                                                                                           restarts)
    finally:
        page.context.close()
