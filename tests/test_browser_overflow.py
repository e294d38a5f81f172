"""At 800 px (the sidebar open, as a visitor opens it to run) no text is cut, measured in a real
browser: no HTML element that clips (overflow other than visible, or an ellipsis) has text wider
than its box (``scrollWidth > clientWidth``), and no chart (SVG) text is shortened with "…" or runs
past its chart's right edge. Looked at: the Summary and Server status, every tab of an H200
sample (the tabs, the *Showing* label, the Timeline's lane labels and legend, the cards), a
lesson's check and reveal, and an upload's Summary whose bar has many causes (chart text below
its chart counts as cut too: a legend taller than the chart). Screenshots go to artifacts/
(browser_overflow_*_800.png)."""

from __future__ import annotations

import pytest

from lab.lessons import LESSONS
from tests.browser_pages import (
    ARTIFACTS,
    ROOT,
    app_server,
    open_app_ready,
    open_sidebar,
    pick_lesson,
    wait_page_idle,
)

RUN_S = 300
UI_S = 120
WIDTH = 800
TRIES = 5  # a click that lands while the page redraws can be lost (tests/test_browser.py)
H200 = "Sample: matmul + bias add, 4096³ bfloat16 (H200)"
LESSON = "calls"  # a lesson with an H200 recording: its check, reveal and explanation open at once
UPLOAD = ROOT / "tests/data/explain/input_bound.json.gz"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]

# Each element whose text is cut. Skipped: a dataframe or code block (they scroll by design),
# hidden elements (no offsetParent, or width 0), Streamlit's "Skip to main content" link,
# KaTeX's MathML copy of a formula (the room code is drawn as one) and any other 1 px box: text
# for screen readers only (the uploader's "add icon" label).
CUT_JS = """() => {
  const out = [];
  for (const e of document.querySelectorAll('[data-testid="stApp"] *')) {
    if (e instanceof SVGTextElement) {
      const t = e.textContent || "", svg = e.ownerSVGElement;
      const r = e.getBoundingClientRect();
      if (!svg || !t.trim() || r.width === 0) continue;
      const box = (e.closest('.vega-embed') || svg).getBoundingClientRect();
      const edge = svg.getBoundingClientRect();
      if (t.endsWith("\\u2026") || r.right > Math.min(edge.right, box.right) + 1)
        out.push("chart text: " + t);
      else if (r.bottom > Math.min(edge.bottom, box.bottom) + 1)
        out.push("chart text below its chart: " + t);
      continue;
    }
    if (e instanceof SVGElement || !e.offsetParent) continue;
    if (e.closest('[data-testid="stDataFrame"], [data-testid="stCode"], [data-testid="stSkipToContent"], '
                  + '.katex-mathml')) continue;
    const cs = getComputedStyle(e), text = (e.innerText || "").trim();
    const clips = cs.overflowX !== "visible" || cs.textOverflow === "ellipsis";
    if (clips && text && e.clientWidth > 1 && e.scrollWidth > e.clientWidth + 1)
      out.push(((e.closest('[data-testid]') || {dataset: {}}).dataset.testid || e.tagName) + ": "
               + text.slice(0, 80) + ` (${e.scrollWidth} > ${e.clientWidth} px)`);
  }
  return out;
}"""


@pytest.fixture(scope="module")
def server(playwright_api):
    with app_server("browser_overflow_server.log") as url:
        yield url


@pytest.fixture
def page(browser, server, playwright_api):
    page = open_app_ready(playwright_api, browser, server, width=WIDTH, height=1400, ui_s=UI_S, run_s=RUN_S)
    open_sidebar(playwright_api, page)
    try:
        yield page
    finally:
        page.context.close()


def _look(page, cut: dict[str, list[str]], where: str) -> None:
    page.wait_for_timeout(1500)  # the charts' first draw
    if found := page.evaluate(CUT_JS):
        cut[where] = found
    page.screenshot(path=str(ARTIFACTS / f"browser_overflow_{where}_{WIDTH}.png"), full_page=True)


def _tabs(page, cut: dict[str, list[str]], prefix: str) -> None:
    main = page.locator('[data-testid="stMain"]')
    for name in [t.inner_text().strip() for t in main.get_by_role("tab").all()]:
        main.get_by_role("tab", name=name, exact=True).click()
        wait_page_idle(page, RUN_S)
        _look(page, cut, f"{prefix}_{name.lower().replace(' ', '_')}")


def test_no_text_is_cut_at_800_px(page):
    cut: dict[str, list[str]] = {}
    _look(page, cut, "start")
    page.locator('[data-testid="stSidebar"]').get_by_text("Server status (for the host)").click()
    _look(page, cut, "server_status")
    main = page.locator('[data-testid="stMain"]')
    box = main.locator('[data-testid="stSelectbox"]').filter(has_text="Showing")
    box.locator("input").click()
    page.keyboard.type(H200[:40])
    page.get_by_role("option", name=H200).first.click()
    wait_page_idle(page, RUN_S)
    _tabs(page, cut, "sample")
    pick_lesson(page, LESSONS[LESSON].title, run_s=RUN_S, tries=TRIES)
    page.locator('[data-testid="stSidebar"]').get_by_role("button", name="Open the H200 recording").click()
    wait_page_idle(page, RUN_S)
    main.get_by_text("Reveal — ").first.wait_for(timeout=RUN_S * 1000)
    _look(page, cut, "lesson")
    assert not cut, "\n".join(f"{where}: {' | '.join(t.replace(chr(10), ' ') for t in found)}"
                               for where, found in cut.items())


def test_an_uploads_summary_with_many_causes_is_not_cut_at_800_px(page):
    """The Summary's bar of an upload with many causes (input_bound: 13 in the legend, more than
    the bar's height held): every legend entry inside the chart."""
    cut: dict[str, list[str]] = {}
    main = page.locator('[data-testid="stMain"]')
    uploader = main.locator('[data-testid="stFileUploader"]')
    if not uploader.is_visible():
        main.get_by_text("Open your own trace").click()
    uploader.locator('input[type="file"]').set_input_files(str(UPLOAD))
    main.get_by_text("Where the time went").first.wait_for(timeout=RUN_S * 1000)
    wait_page_idle(page, RUN_S)
    _look(page, cut, "upload_summary")
    assert not cut, "\n".join(f"{where}: {' | '.join(found)}" for where, found in cut.items())


QUESTION = "At 64³, which is larger in the table's aten::mm row: Self CPU or Self CUDA?"


@pytest.fixture(scope="module")
def room_server(playwright_api, tmp_path_factory):
    db = tmp_path_factory.mktemp("rooms") / "rooms.sqlite3"
    with app_server("browser_overflow_room_server.log", env={"PROFILER_LAB_DATABASE_URL": f"sqlite:///{db}"}) as url:
        yield url


def test_the_room_is_not_cut_at_800_px(browser, room_server, playwright_api):
    """The instructor's room view at 800 px once an attendee locked in a prediction: its chart's
    title (the question, ~80 characters) and the rest of the view fit."""
    import re

    teacher = open_app_ready(playwright_api, browser, room_server, width=WIDTH, height=1400, ui_s=UI_S, run_s=RUN_S)
    attendee = open_app_ready(playwright_api, browser, room_server, width=1280, height=1000, ui_s=UI_S, run_s=RUN_S)
    try:
        open_sidebar(playwright_api, teacher)
        bar = teacher.locator('[data-testid="stSidebar"]')
        bar.get_by_role("button", name="Open a room (instructor)").click()
        hosted = bar.get_by_text(re.compile(r"You host room [A-Z]{5}"))
        playwright_api.expect(hosted).to_be_visible(timeout=UI_S * 1000)
        code = re.search(r"[A-Z]{5}", hosted.inner_text().replace("You host room", "")).group(0)
        side = attendee.locator('[data-testid="stSidebar"]')
        side.get_by_label("Room code").fill(code)
        side.get_by_label("Your name (shown to the instructor)").fill("attendee")
        side.get_by_role("button", name="Join the room").click()
        playwright_api.expect(side.get_by_text(re.compile(rf"In room {code} as"))).to_be_visible(timeout=UI_S * 1000)
        wait_page_idle(attendee, RUN_S)
        side.get_by_role("radiogroup", name=QUESTION).get_by_text("Self CPU", exact=True).click()
        side.get_by_role("button", name="Lock in my predictions").click()
        view = teacher.locator(".st-key-instructor_view")
        playwright_api.expect(view.get_by_text("1 answer")).to_be_visible(timeout=60_000)
        cut: dict[str, list[str]] = {}
        _look(teacher, cut, "room")
        assert not cut, cut
    finally:
        teacher.context.close()
        attendee.context.close()
