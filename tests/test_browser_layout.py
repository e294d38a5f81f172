"""The page's layout in a real browser at 1280 and 800 px, measured in the DOM rather
than compared as pictures: at 800 px the sidebar is opened as a visitor opening it to run.

- Summary: no metric card's label, value or delta is cut (scrollWidth > clientWidth: "23.4…").
- Memory, zoomed to the peak's step: the peak's label lies inside the plot ("peak 3" before),
  and the "Zoom to" box shows its choice whole ("whole trac" at 800 px before).
- Trace: *Open in Perfetto* (a frame of its own) has the Download buttons' font, size and weight,
  and the page's font is loaded in its frame (it fell back to the system's sans-serif); each
  Download button's label is whole ("Download …" at 800 px before).
- Table: the Note column is beside the name, in view, its mark fits its cell, and each note is
  whole under the table (the sentences were the 16th column, out of view and cut at 1280 px).
- Compare: the totals' A, B, B − A and B / A, and the diff tables' A (µs) … B / A, are in view
  (at 800 px B / A and the kernels' A/B columns had scrolled out of it).
- Roofline (the size sweep's runs): a view of its own below "Showing" (it sat above it on every
  view); no point label overlaps another, a region name or the plot's edge; the roof is drawn
  above the best run; the y axis reads in a readable unit at powers of ten ("0.000001" before).
  The reveal's window against its GEMM kernel is checked in data terms in
  tests/test_reveal_window.py. Screenshots go to artifacts/.

A dataframe is a canvas: its DOM holds an accessible table of the columns it draws (those at
least partly in view), and a scroller whose scrollWidth is the sum of its columns' widths. A
column is wholly in view when the widths before it fit the scroller's clientWidth; the widths
set in ui/views.py (the columns after those compared) tell how much of scrollWidth they take.
"""

from __future__ import annotations

import re

import pytest

from lab.views.tables import KERNEL_FIRST, NOTE_FOOTNOTES
from tests.browser_pages import ARTIFACTS, app_server, open_app_ready, open_sidebar, wait_page_idle
from ui.layout import COLLAPSE_BELOW_PX
from ui.views import (
    DIFF_COLUMN_PX,
    DIFF_ORDER,
    KERNEL_FIGURE_PX,
    KERNEL_NAME_PX,
    NOTE_COLUMN_PX,
    TABLE_NAME_PX,
    TOTALS_MEANING_PX,
)

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
    if request.param < COLLAPSE_BELOW_PX:  # folded on a narrow window: opened, as a visitor does to run
        playwright_api.expect(page.locator('[data-testid="stSidebar"]')).to_have_attribute("data-collapsed", "true")
        open_sidebar(playwright_api, page)
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


# Each dataframe of the main column: the headers of the columns it draws, and its scroller's widths.
GRIDS_JS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]')].map(d => {
    const s = d.querySelector('.dvn-scroller');
    return {headers: [...d.querySelectorAll('th')].map(t => t.textContent),
            cells: [...d.querySelectorAll('td')].map(t => t.textContent),
            scroll_px: s.scrollWidth, client_px: s.clientWidth};
})"""
# A text's width in the grid's font (Glide draws cells in the page's 14 px font, 8 px padding a side).
TEXT_PX_JS = """(text) => { const c = document.createElement('canvas').getContext('2d');
    c.font = '14px ' + getComputedStyle(document.querySelector('[data-testid="stMain"]')).fontFamily;
    return c.measureText(text).width; }"""
CELL_PADDING_PX = 16


def grids(page) -> list[dict]:
    """GRIDS_JS, once every grid has drawn its headers (the grid's code loads after the page run)."""
    page.wait_for_function("""() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]')]
        .every(d => d.querySelector('th'))""", timeout=UI_S * 1000)
    return page.evaluate(GRIDS_JS)


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
    # Both Download buttons' labels whole (two quarter-columns cut them to "Download …" at 800 px).
    buttons = main(visitor).locator('[data-testid="stDownloadButton"] button')
    assert buttons.all_inner_texts() == ["Download trace (.json.gz)", "Download trace (.json)"]
    cut = visitor.evaluate(CUT_JS, '[data-testid="stMain"] [data-testid="stDownloadButton"] button, '
                                   '[data-testid="stMain"] [data-testid="stDownloadButton"] button *')
    assert cut == []
    shot(visitor, "trace")


def test_table_notes_beside_the_name_and_whole_under_it(visitor):
    pick(visitor, "Showing", H200)
    tab(visitor, "Table")
    table, kernels = grids(visitor)[:2]
    assert table["headers"][:2] == ["Name", "Note"], table["headers"]  # drawn: in view
    assert TABLE_NAME_PX + NOTE_COLUMN_PX <= table["client_px"], table
    # The GPU kernel list: the name, Total and Share in view (at 800 px only Calls was, beside a 320 px name).
    assert tuple(kernels["headers"][:3]) == KERNEL_FIRST, kernels["headers"]
    assert KERNEL_NAME_PX + 2 * KERNEL_FIGURE_PX <= kernels["client_px"], kernels
    for header in KERNEL_FIRST[1:]:
        assert visitor.evaluate(TEXT_PX_JS, header) + CELL_PADDING_PX <= KERNEL_FIGURE_PX, header
    marks = {c for c in table["cells"] if c.startswith("label")}
    assert marks == {"label ¹", "label ²"}, table["cells"]  # the H200 step: a CPU and a GPU label row
    for mark in marks:
        assert visitor.evaluate(TEXT_PX_JS, mark) + CELL_PADDING_PX <= NOTE_COLUMN_PX, mark
    notes = [t for t in main(visitor).locator('[data-testid="stCaptionContainer"]').all_inner_texts()
             if t and t[0] in "¹²"]
    assert sorted(n[:1] for n in notes) == sorted("¹²"), notes
    assert {n[2:] for n in notes} == set(NOTE_FOOTNOTES.values()), notes
    assert visitor.evaluate(CUT_JS, '[data-testid="stMain"] [data-testid="stCaptionContainer"] p') == []
    shot(visitor, "table")


def test_compare_keeps_what_it_compares_in_view(visitor):
    """Two H200 recordings (the first two subjects: Compare's default pair)."""
    tab(visitor, "Compare")
    totals, *diffs = grids(visitor)
    assert totals["headers"][:5] == ["total", "A", "B", "B − A", "B / A"], totals["headers"]
    assert totals["scroll_px"] - TOTALS_MEANING_PX <= totals["client_px"], totals  # all but "meaning" fit
    assert len(diffs) == 2  # the kernels and the operators
    compared = list(DIFF_ORDER[:5])
    after = sum(DIFF_COLUMN_PX[c] for c in DIFF_ORDER[5:])
    for diff in diffs:
        assert diff["headers"][:5] == compared, diff["headers"]
        assert diff["scroll_px"] - after <= diff["client_px"], diff  # the name and A … B / A fit
    shot(visitor, "compare")


def test_roofline_labels_overlap_nothing(visitor, playwright_api):
    visitor.locator('[data-testid="stSidebar"]').get_by_role("button", name="Run the size sweep here").click()
    roof = visitor.locator(".st-key-my_roofline")
    playwright_api.expect(roof.locator('[data-testid="stVegaLiteChart"]')).to_be_visible(timeout=RUN_S * 1000)
    wait_page_idle(visitor, RUN_S)
    # Its own view, opened by the sweep, below the subject line (it sat above "Showing" on every view).
    playwright_api.expect(main(visitor).get_by_role("tab", name="Roofline", exact=True)).to_have_attribute(
        "aria-selected", "true")
    subject = main(visitor).locator('[data-testid="stSelectbox"]').filter(has_text="Showing").bounding_box()
    assert subject is not None and subject["y"] + subject["height"] <= roof.bounding_box()["y"]
    roof.scroll_into_view_if_needed()
    roof.screenshot(path=str(ARTIFACTS / f"browser_layout_roofline_{visitor.viewport_size['width']}.png"))
    chart = '.st-key-my_roofline [data-testid="stVegaLiteChart"]'
    marks = visitor.evaluate(TEXTS_JS, chart)
    labels = [t for t in marks["texts"] if "×" in t["text"]]
    names = [t for t in marks["texts"] if t["text"].endswith("-bound")]
    assert len(labels) >= 3 and len(names) == 2, marks["texts"]
    for i, a in enumerate(labels):
        assert _inside(a, marks["frame"]), a
        for b in labels[i + 1:] + names:
            assert not _overlap(a, b), (a, b)
    axes = visitor.evaluate(AXES_JS, chart)
    assert re.fullmatch(r"achieved [GTM]FLOP/s", axes["y_title"]), axes
    assert len(axes["y_labels"]) >= 3 and all(TICK.fullmatch(t) for t in axes["y_labels"]), axes  # not "0.000001"
    # The roof above the best run: the flat top of its line no lower than the highest point's centre
    # (a roof measured at warm-up on a busy host is raised to that run, and says so).
    assert axes["roof_top_px"] <= min(axes["point_centres_px"]) + 1, axes
    caption = main(visitor).locator('[data-testid="stCaptionContainer"]').filter(has_text="Roof: ").inner_text()
    assert ("raised" in caption) == bool(axes["subtitle"]), (caption, axes["subtitle"])


# A tick label a reader takes in: at most 3 decimals ("0.1", "20", "1,000").
TICK = re.compile(r"\d{1,3}(,\d{3})*(\.\d{1,3})?")
# The roofline's y axis (title, tick labels), its subtitle, the roof line's top and the points' centres.
AXES_JS = """(sel) => {
    const chart = document.querySelector(sel);
    const axis = [...chart.querySelectorAll('.role-axis')].find(a => (a.getAttribute('aria-label') || '')
        .startsWith('Y-axis'));
    const texts = (root, role) => [...root.querySelectorAll(`.${role} text`)].map(t => t.textContent);
    const line = chart.querySelector('.mark-line.role-mark path').getBoundingClientRect();
    return {y_title: texts(axis, 'role-axis-title').join(' '),
            y_labels: texts(axis, 'role-axis-label').filter(t => t !== ''),
            y_label_count: texts(axis, 'role-axis-label').length,
            subtitle: texts(chart, 'role-title-subtitle'),
            roof_top_px: line.top,  // the path's geometry: its flat top is the peak (the stroke not counted)
            point_centres_px: [...chart.querySelectorAll('.mark-symbol.role-mark path')]
                .map(p => { const r = p.getBoundingClientRect(); return (r.top + r.bottom) / 2; })};
}"""
