"""The page's layout in a real browser at 1280 and 800 px (issue 26), measured in the DOM rather
than compared as pictures: at 800 px the sidebar is opened as a visitor opening it to run.

- Summary: no metric card's label, value or delta is cut (scrollWidth > clientWidth: "23.4…").
- Memory, zoomed to the peak's step: the peak's label lies inside the plot ("peak 3" before),
  and the "Zoom to" box shows its choice whole ("whole trac" at 800 px before).
- Trace: *Open in Perfetto* (a frame of its own) has the Download buttons' font, size and weight,
  and the page's font is loaded in its frame (it fell back to the system's sans-serif).
- Roofline (the size sweep's runs): no point label overlaps another, a region name or the plot's
  edge. The reveal's window against its GEMM kernel is checked in data terms in
  tests/test_reveal_window.py. Screenshots go to artifacts/.
"""

from __future__ import annotations

import pytest

from tests.browser_pages import ARTIFACTS, app_server, open_app_ready, wait_page_idle
from ui.layout import COLLAPSE_BELOW_PX

RUN_S = 300
UI_S = 120
H200 = "Sample: matmul + bias add, 4096³ bfloat16 (H200)"
MEMORY = "Sample: up-projection, gelu, down-projection, each labelled, 4096×8192×8192 bfloat16 (H200)"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def server(playwright_api):
    with app_server("browser_layout_server.log") as url:
        yield url


@pytest.fixture(params=[1280, 800])
def visitor(request, browser, server, playwright_api):
    page = open_app_ready(playwright_api, browser, server, width=request.param, height=1600, ui_s=UI_S, run_s=RUN_S)
    bar = page.locator('[data-testid="stSidebar"]')
    if request.param < COLLAPSE_BELOW_PX:  # folded on a narrow window: opened, as a visitor does to run
        playwright_api.expect(bar).to_have_attribute("data-collapsed", "true")
        page.locator('[data-testid="stExpandSidebarButton"]').first.click()
        playwright_api.expect(bar).to_have_attribute("data-collapsed", "false")
        page.wait_for_timeout(600)  # its slide-in
    try:
        yield page
    finally:
        page.context.close()


def main(page):
    return page.locator('[data-testid="stMain"]')


def pick(page, label: str, option: str) -> None:
    box = main(page).locator('[data-testid="stSelectbox"]').filter(has_text=label)
    box.locator("input").click()
    page.keyboard.type(option[:40])
    page.get_by_role("option", name=option).first.click()
    wait_page_idle(page, RUN_S)


def tab(page, name: str) -> None:
    main(page).get_by_role("tab", name=name, exact=True).click()
    wait_page_idle(page, RUN_S)


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"browser_layout_{name}_{page.viewport_size['width']}.png"))


CUT_JS = """(sel) => [...document.querySelectorAll(sel)]
    .filter(e => e.offsetParent && e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""
# Text marks of a Vega chart (not its axes' or legend's labels), with their boxes and the plot's.
TEXTS_JS = """(sel) => {
    const chart = document.querySelector(sel);
    const plot = chart.querySelector('.mark-rect.role-mark path, .mark-rect.role-mark rect');
    const frame = chart.querySelector('.role-frame path, .background');
    const box = r => ({x0: r.left, y0: r.top, x1: r.right, y1: r.bottom});
    return {texts: [...chart.querySelectorAll('.mark-text.role-mark text')]
                .map(t => ({text: t.textContent, ...box(t.getBoundingClientRect())})),
            frame: box((frame || plot).getBoundingClientRect())};
}"""


def _overlap(a: dict, b: dict) -> bool:
    return a["x0"] < b["x1"] and b["x0"] < a["x1"] and a["y0"] < b["y1"] and b["y0"] < a["y1"]


def _inside(a: dict, frame: dict) -> bool:
    return a["x0"] >= frame["x0"] - 1 and a["x1"] <= frame["x1"] + 1 and a["y0"] >= frame["y0"] - 1 \
        and a["y1"] <= frame["y1"] + 1


def test_summary_metric_cards_are_whole(visitor):
    pick(visitor, "Showing", H200)
    cards = visitor.locator('[data-testid="stMetric"]')
    assert cards.count() >= 5
    cut = visitor.evaluate(CUT_JS, '[data-testid="stMetricValue"], [data-testid="stMetricValue"] > div, '
                                   '[data-testid="stMetricDelta"] > div, [data-testid="stMetricLabel"] p')
    shot(visitor, "summary")
    assert cut == []


def test_memory_peak_label_inside_the_plot(visitor):
    pick(visitor, "Showing", MEMORY)
    tab(visitor, "Memory")
    for focus in ("whole trace", "step 1"):
        pick(visitor, "Zoom to", focus)
        box = main(visitor).locator('[data-testid="stSelectbox"]').filter(has_text="Zoom to").locator("input")
        assert box.input_value() == focus
        widths = box.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert widths[0] <= widths[1] + 1, (focus, widths)  # "whole trac" at 800 px before
        marks = visitor.evaluate(TEXTS_JS, '[data-testid="stVegaLiteChart"]')
        peaks = [t for t in marks["texts"] if t["text"].startswith("peak ")]
        assert peaks, marks["texts"]
        for label in peaks:
            assert _inside(label, marks["frame"]), (focus, label, marks["frame"])
    shot(visitor, "memory")


def test_open_in_perfetto_has_the_page_font(visitor):
    pick(visitor, "Showing", H200)
    tab(visitor, "Trace")
    ref = main(visitor).get_by_role("button", name="Download trace (.json)", exact=True)
    want = ref.evaluate("b => { const s = getComputedStyle(b); return [s.fontFamily, s.fontSize, s.fontWeight]; }")
    frame = main(visitor).frame_locator('iframe[data-testid="stIFrame"]').first
    button = frame.get_by_role("button", name="Open in Perfetto")
    got = button.evaluate("b => { const s = getComputedStyle(b); return [s.fontFamily, s.fontSize, s.fontWeight]; }")
    assert got == want
    loaded = button.evaluate("""async b => { await document.fonts.ready;
        return [...document.fonts].filter(f => f.status === 'loaded').map(f => f.family); }""")
    family = want[0].split(",")[0].strip().strip('"')
    assert any(family in f for f in loaded), (family, loaded)
    shot(visitor, "trace")


def test_roofline_labels_overlap_nothing(visitor, playwright_api):
    visitor.locator('[data-testid="stSidebar"]').get_by_role("button", name="Run the size sweep here").click()
    roof = visitor.locator(".st-key-my_roofline")
    playwright_api.expect(roof.locator('[data-testid="stVegaLiteChart"]')).to_be_visible(timeout=RUN_S * 1000)
    wait_page_idle(visitor, RUN_S)
    roof.scroll_into_view_if_needed()
    roof.screenshot(path=str(ARTIFACTS / f"browser_layout_roofline_{visitor.viewport_size['width']}.png"))
    marks = visitor.evaluate(TEXTS_JS, '.st-key-my_roofline [data-testid="stVegaLiteChart"]')
    labels = [t for t in marks["texts"] if "×" in t["text"]]
    names = [t for t in marks["texts"] if t["text"].endswith("-bound")]
    assert len(labels) >= 3 and len(names) == 2, marks["texts"]
    for i, a in enumerate(labels):
        assert _inside(a, marks["frame"]), a
        for b in labels[i + 1:] + names:
            assert not _overlap(a, b), (a, b)
